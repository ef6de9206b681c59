//! libringswitch: the C ABI over the client library.

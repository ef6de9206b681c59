//! netmap compatibility.

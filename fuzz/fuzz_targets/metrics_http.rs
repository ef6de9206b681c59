//! The metrics listener's request heads (`serve --metrics`), as it parses
//! the bytes a TCP peer sent so far: any bytes give a request, "read more"
//! or a refusal with a status, never a panic; a parsed head never claims
//! more than it read or than the bound, and reading more never changes
//! what a complete head said.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringswitch_daemon::metrics::http::{parse, HttpError, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(Some((req, used))) => {
            assert!(
                used <= data.len() && used <= MAX_HEAD,
                "{used} of {}",
                data.len()
            );
            assert!(req.path.starts_with('/'), "{:?}", req.path);
            // Pipelined bytes after the head do not change it.
            let mut more = data.to_vec();
            more.extend_from_slice(b"GET / HTTP/1.1\r\n");
            assert_eq!(parse(&more), Ok(Some((req, used))));
        }
        Ok(None) => assert!(data.len() < MAX_HEAD, "an incomplete head within the bound"),
        Err(e) => {
            // Every refusal has a status to answer with.
            let _ = e.status().code();
            if data.len() < MAX_HEAD && e == HttpError::HeadTooLarge {
                // Too many header lines, not too many bytes.
                assert!(data.contains(&b'\n'));
            }
        }
    }
});

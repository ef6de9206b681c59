//! The daemon's configuration file (`serve --config FILE`), replayed at every
//! start: any text gives requests or an error sentence, never a panic; what
//! parses round-trips through the JSON a later save would write.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ringswitch_control::proto::Request;
use ringswitch_daemon::registry::parse_config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_config(text, Path::new("fuzz.json")) {
        Ok(requests) => {
            let again = serde_json::json!({ "version": 1, "requests": requests }).to_string();
            let back = parse_config(&again, Path::new("again.json"))
                .expect("a configuration the daemon parsed parses again once saved");
            assert_eq!(back, requests, "saving and loading keeps every request");
            let _: Vec<Request> = back;
        }
        Err(e) => assert!(!e.is_empty(), "every refusal says why"),
    }
});

//! The control protocol as the daemon reads it from a socket (one JSON
//! request per datagram) and the port names inside it: any bytes give a
//! request or an error, never a panic; what parses round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringswitch_control::name::{check_switch_name, PortName};
use ringswitch_control::proto::Request;

fuzz_target!(|data: &[u8]| {
    // The request, exactly as `serve_one` decodes a datagram.
    if let Ok(req) = serde_json::from_slice::<Request>(data) {
        let text = serde_json::to_vec(&req).expect("a parsed request serializes");
        let back: Request = serde_json::from_slice(&text).expect("and parses again");
        assert_eq!(back, req);
    }
    // Port and switch names, as the daemon parses the names inside requests.
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = check_switch_name(s);
        if let Ok(name) = s.parse::<PortName>() {
            if let Some(g) = name.conf {
                assert!(
                    g.validate().is_ok(),
                    "a parsed @conf geometry is in range: {g:?}"
                );
            }
            // The canonical spelling parses to the same name.
            let shown = name.to_string();
            let again: PortName = shown
                .parse()
                .unwrap_or_else(|e| panic!("'{shown}' (shown from '{s}') does not parse: {e}"));
            assert_eq!(again.target, name.target, "'{s}' shown as '{shown}'");
        }
    }
});

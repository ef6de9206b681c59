//! The daemon's own vhost-user messages (`ringswitch_daemon::vhost_user::
//! parse_own`): the 20 bytes it peeks at on a VM port's socket before the
//! `vhost` crate reads a message, to take SEND_RARP and an early
//! SET_VRING_ENABLE itself. Any bytes parse without a panic; what is taken
//! is exactly a version-1 header with no flag but NEED_REPLY, an 8-byte
//! payload, and one of those two requests (the early one only before any
//! feature is acked); the RARP's address is the payload's first 6 bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringswitch_daemon::vhost_user::{parse_own, OwnMessage};

fuzz_target!(|input: (bool, [u8; 20])| {
    let (nothing_acked, msg) = input;
    let word = |i: usize| u32::from_le_bytes([msg[i], msg[i + 1], msg[i + 2], msg[i + 3]]);
    let (request, flags, size) = (word(0), word(4), word(8));
    let taken = parse_own(&msg, nothing_acked);
    let well_formed = size == 8 && flags & !0xb == 0;
    match taken {
        None => assert!(
            !(well_formed && (request == 19 || (request == 18 && nothing_acked))),
            "a well-formed SEND_RARP or early SET_VRING_ENABLE was left to the crate"
        ),
        Some(m) => {
            assert!(well_formed, "a malformed header was taken: {msg:?}");
            assert_eq!(m.request(), request);
            let need_reply = flags & 0x8 != 0;
            match m {
                OwnMessage::SendRarp { mac, need_reply: r } => {
                    assert_eq!(mac[..], msg[12..18]);
                    assert_eq!(r, need_reply);
                }
                OwnMessage::EarlyVringEnable {
                    index,
                    enable,
                    need_reply: r,
                } => {
                    assert!(nothing_acked);
                    assert_eq!(index, word(12));
                    assert_eq!(u32::from(enable), word(16));
                    assert_eq!(r, need_reply);
                }
                OwnMessage::BadEarlyVringEnable { need_reply: r } => {
                    assert!(nothing_acked && word(16) > 1);
                    assert_eq!(r, need_reply);
                }
            }
        }
    }
});

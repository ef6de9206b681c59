//! OpenFlow 1.3 as the switch reads it from a controller's connection: any
//! bytes, cut into messages by the `Framer` and handled by a `Session`,
//! give typed messages or the right refusal, never a panic; whatever
//! decodes encodes back to a message that decodes to the same value; and
//! everything the session writes back is itself well-framed OpenFlow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringswitch_openflow::{Event, Framer, Message, Session};

/// decode(encode(x)) == x for anything that decodes.
fn round_trip(bytes: &[u8]) {
    if let Ok(msg) = Message::decode(bytes) {
        let wire = msg.encode().expect("a decoded message encodes");
        let back = Message::decode(&wire)
            .unwrap_or_else(|e| panic!("{msg:?} encoded to bytes that do not decode: {e}"));
        assert_eq!(back, msg);
    }
}

/// Every message the session queued frames and decodes.
fn check_output(out: &[u8]) {
    let mut f = Framer::default();
    let mut rest = out;
    while !rest.is_empty() {
        let n = f.push(rest);
        rest = &rest[n..];
        while let Some(frame) = f.next_frame().expect("our output frames") {
            Message::decode(&frame)
                .unwrap_or_else(|e| panic!("we wrote a message that does not decode: {e}"));
        }
    }
    assert_eq!(f.buffered(), 0, "our output ends on a message boundary");
}

fuzz_target!(|data: &[u8]| {
    // The bytes as one message.
    round_trip(data);

    // The bytes as a stream, in pieces whose size the first byte picks.
    let piece = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut framer = Framer::default();
    let mut rest = data;
    'stream: while !rest.is_empty() {
        let n = framer.push(&rest[..piece.min(rest.len())]);
        rest = &rest[n..];
        loop {
            match framer.next_frame() {
                Ok(Some(frame)) => round_trip(&frame),
                Ok(None) => break,
                Err(_) => break 'stream,
            }
        }
    }

    // The bytes as what a controller sends after its HELLO, and on their
    // own (no HELLO first).
    for hello_first in [true, false] {
        let mut s = Session::new();
        if hello_first {
            s.receive(&[4, 0, 0, 8, 0, 0, 0, 1]);
        }
        s.receive(data);
        while let Some(ev) = s.poll_event() {
            if let Event::Message(r) = ev {
                let wire = r.message.encode().expect("a handed-up message encodes");
                assert_eq!(Message::decode(&wire).as_ref(), Ok(&r.message));
            }
        }
        check_output(&s.take_output());
    }
});

//! The RESP command decoder (`daemon/src/surfaces/resp/decode.rs`), included
//! by path so that this target builds from `bytes` and `tokio-util` alone.
//!
//! Input: one byte picking the limits and a chunking seed, then the byte
//! stream a client sends. Checks, beyond "never panics":
//! - every command is non-empty and within the limits;
//! - an error message holds no control characters (no raw client bytes);
//! - the stream decodes to the same commands and error whether it arrives
//!   whole, one byte at a time, or in irregular chunks;
//! - `decode_eof` after the stream never panics and agrees with whether a
//!   command was left incomplete;
//! - every command, re-encoded as a canonical RESP array, decodes back to
//!   itself.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

#[allow(dead_code)]
#[path = "../../daemon/src/surfaces/resp/decode.rs"]
mod decode;

use decode::{CommandDecoder, Limits};

/// What a stream decodes to: the commands, then the error if any, and
/// whether the end of stream was clean.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    cmds: Vec<Vec<Bytes>>,
    error: Option<String>,
    eof_clean: Option<bool>,
}

fn limits(selector: u8) -> Limits {
    match selector % 4 {
        // What the daemon uses.
        0 | 1 => Limits::default(),
        // Small enough for the fuzzer to reach every cap.
        2 => Limits { max_args: 3, max_bulk: 8, max_frame: 40 },
        _ => Limits {
            max_args: usize::from(selector >> 2 & 7),
            max_bulk: usize::from(selector >> 5) * 3,
            max_frame: usize::from(selector >> 2) * 2,
        },
    }
}

fn run(limits: Limits, input: &[u8], mut next_chunk: impl FnMut() -> usize) -> Outcome {
    let mut dec = CommandDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut cmds = Vec::new();
    let mut pos = 0;
    loop {
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(args)) => {
                    assert!(!args.is_empty(), "empty command");
                    assert!(args.len() <= limits.max_args, "{} args > {:?}", args.len(), limits);
                    assert!(args.iter().all(|a| a.len() <= limits.max_bulk), "argument over {limits:?}");
                    let total: usize = args.iter().map(Bytes::len).sum();
                    assert!(total <= limits.max_frame, "{total} bytes > {limits:?}");
                    cmds.push(args);
                }
                Ok(None) => break,
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.chars().any(char::is_control), "control character in {msg:?}");
                    return Outcome { cmds, error: Some(msg), eof_clean: None };
                }
            }
        }
        if pos == input.len() {
            // End of stream: what is left is either nothing or a truncated command.
            let left = buf.clone();
            let eof_clean = match dec.decode_eof(&mut buf) {
                Ok(None) => true,
                Err(decode::DecodeError::Truncated) => false,
                Ok(Some(args)) => panic!("decode_eof found a command decode missed: {args:?}"),
                Err(e) => panic!("decode_eof: unexpected {e}"),
            };
            assert_eq!(eof_clean, left.is_empty(), "decode_eof with {:?} left", left);
            return Outcome { cmds, error: None, eof_clean: Some(eof_clean) };
        }
        let n = next_chunk().clamp(1, input.len() - pos);
        buf.extend_from_slice(&input[pos..pos + n]);
        pos += n;
    }
}

/// Re-encodes each command as a canonical array and decodes it back.
fn round_trip(limits: Limits, cmds: &[Vec<Bytes>]) {
    // An inline command's array form is longer than its line: no frame cap.
    let limits = Limits { max_frame: usize::MAX / 4, ..limits };
    let mut wire = BytesMut::new();
    for cmd in cmds {
        wire.extend_from_slice(format!("*{}\r\n", cmd.len()).as_bytes());
        for arg in cmd {
            wire.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            wire.extend_from_slice(arg);
            wire.extend_from_slice(b"\r\n");
        }
    }
    let mut dec = CommandDecoder::new(limits);
    for cmd in cmds {
        match dec.decode(&mut wire) {
            Ok(Some(back)) => assert_eq!(&back, cmd, "round trip"),
            other => panic!("round trip of {cmd:?}: {other:?}"),
        }
    }
    assert!(wire.is_empty() && matches!(dec.decode_eof(&mut wire), Ok(None)), "round trip left {wire:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else { return };
    let limits = limits(selector);
    let whole = run(limits, input, || usize::MAX);
    let bytewise = run(limits, input, || 1);
    assert_eq!(whole, bytewise, "whole vs byte-at-a-time, limits {limits:?}");
    // Irregular chunks from a tiny generator seeded by the input.
    let mut state = u32::from(selector) | 1;
    let chunked = run(limits, input, || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state % 7 + 1) as usize
    });
    assert_eq!(whole, chunked, "whole vs chunked, limits {limits:?}");
    round_trip(limits, &whole.cmds);
});

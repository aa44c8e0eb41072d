//! Iterative, resumable decoder for RESP2 *commands*.
//!
//! Clients send commands as a flat array of bulk strings
//! (`*<n>\r\n` followed by `n` times `$<len>\r\n<bytes>\r\n`), or as an
//! "inline" line of blank-separated words (`PING\r\n`, as typed into
//! telnet/nc). That is all this module parses: it is not a general RESP
//! decoder, and anything else inside an array (nested arrays, integers,
//! simple strings, errors, null bulk strings) is rejected.
//!
//! Properties:
//! * **No recursion.** A nested array is an error as soon as its `*` byte is
//!   seen, so `*1\r\n` repeated 300,000 times fails after 8 bytes.
//! * **Resumable, linear work.** A partial command stays at the front of the
//!   buffer while the decoder remembers how far it has parsed: the positions
//!   of the arguments already complete, the length of a bulk string whose
//!   payload is still arriving (room for the rest is reserved at once), and
//!   how far a line search got. Nothing is parsed twice and payloads are never
//!   scanned, so feeding a command one byte at a time costs time linear in
//!   its size.
//! * **Bounded.** Argument count, argument size and command size are capped by
//!   [`Limits`], and every cap is checked from the announced lengths *before*
//!   the data is buffered.
//! * **Zero-copy.** A complete command is split off the read buffer with one
//!   `split_to(..).freeze()` and its arguments are [`Bytes`] slices of it; the
//!   only allocation per command is the returned `Vec`.
//! * After an error the decoder's state is unspecified: the caller is expected
//!   to close the connection.

use std::fmt;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// Longest accepted `*<n>\r\n` or `$<n>\r\n` line, CRLF included: a marker,
/// a sign and 20 digits (any 64-bit length) fit with room to spare.
const MAX_LENGTH_LINE: usize = 32;

/// Most argument slots reserved before the arguments arrive, so that a client
/// announcing a large array cannot make us allocate for it up front; typical
/// commands (a handful of arguments) never need to grow the `Vec`.
const PREALLOC_ARGS: usize = 16;

/// Size caps enforced while decoding. Each is checked against announced
/// lengths, before the corresponding bytes are buffered.
///
/// Keep the values well below `usize::MAX / 2`; they are meant to be small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments (command name included) in one command.
    pub max_args: usize,
    /// Most bytes in one argument (bulk string payload or inline word).
    pub max_bulk: usize,
    /// Most bytes in one command on the wire, headers and CRLFs included
    /// (for an inline command: the whole line with its terminator).
    pub max_frame: usize,
}

impl Limits {
    /// 1024 arguments: rate-limit commands carry a handful, so this leaves
    /// ample room for batch forms while capping one command's `Vec` at 32 KiB.
    pub const DEFAULT_MAX_ARGS: usize = 1024;
    /// 512 KiB per argument: keys and counters are tiny; this is generous
    /// headroom yet 1/1024 of Redis's own 512 MiB `proto-max-bulk-len`.
    pub const DEFAULT_MAX_BULK: usize = 512 * 1024;
    /// 1 MiB per command: bounds the memory one connection can pin in a
    /// partial command while still fitting any single maximal argument.
    pub const DEFAULT_MAX_FRAME: usize = 1024 * 1024;
}

impl Default for Limits {
    /// [`Limits::DEFAULT_MAX_ARGS`], [`Limits::DEFAULT_MAX_BULK`] and
    /// [`Limits::DEFAULT_MAX_FRAME`].
    fn default() -> Self {
        Limits {
            max_args: Self::DEFAULT_MAX_ARGS,
            max_bulk: Self::DEFAULT_MAX_BULK,
            max_frame: Self::DEFAULT_MAX_FRAME,
        }
    }
}

/// Why a byte stream is not a valid sequence of commands.
///
/// Messages never contain raw client bytes: a single offending byte is shown
/// escaped (`'\r'`, `'\x01'`), lengths are shown as numbers.
#[derive(Debug)]
#[non_exhaustive]
pub enum DecodeError {
    /// Reading from the transport failed (required by `tokio_util` codecs).
    Io(std::io::Error),
    /// An array appeared where a command argument was expected.
    NestedArray,
    /// A command argument was not a bulk string; `found` is its first byte.
    NotBulkString {
        /// The byte found where `$` was expected.
        found: u8,
    },
    /// The command has more arguments than [`Limits::max_args`].
    TooManyArgs {
        /// Announced (array) or counted (inline) number of arguments.
        count: u64,
        /// The configured limit.
        limit: usize,
    },
    /// An argument is longer than [`Limits::max_bulk`].
    ArgTooLarge {
        /// Announced (bulk) or measured (inline) length in bytes.
        len: u64,
        /// The configured limit.
        limit: usize,
    },
    /// The command would be larger than [`Limits::max_frame`].
    FrameTooLarge {
        /// Size in bytes the command would reach at least.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A null bulk string (`$-1`) was sent as an argument.
    NullBulk,
    /// A length below -1 (arrays) or below 0 (bulk strings).
    NegativeLength {
        /// Which length: "array length" or "bulk string length".
        what: &'static str,
    },
    /// A length line that is not `<marker><decimal digits>\r\n`.
    MalformedLength {
        /// Which length: "array length" or "bulk string length".
        what: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The payload of a bulk string was not followed by `\r\n`.
    MissingCrlf {
        /// Announced payload length in bytes.
        len: usize,
    },
    /// No line terminator within the allowed number of bytes.
    LineTooLong {
        /// Which line: "array header", "bulk string header", "inline command".
        what: &'static str,
        /// The number of bytes searched.
        limit: usize,
    },
    /// The stream ended in the middle of a command.
    Truncated,
}

fn type_name(byte: u8) -> &'static str {
    match byte {
        b'+' => "a simple string",
        b'-' => "an error",
        b':' => "an integer",
        b'*' => "an array",
        _ => "a byte that is not a RESP2 type marker",
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Io(e) => write!(f, "I/O error: {e}"),
            DecodeError::NestedArray => {
                f.write_str("nested arrays are not commands: a command is a flat array of bulk strings")
            }
            DecodeError::NotBulkString { found } => write!(
                f,
                "command arguments must be bulk strings ('$'), found {} ('{}')",
                type_name(*found),
                found.escape_ascii()
            ),
            DecodeError::TooManyArgs { count, limit } => {
                write!(f, "array of {count} arguments exceeds the limit of {limit}")
            }
            DecodeError::ArgTooLarge { len, limit } => {
                write!(f, "argument of {len} bytes exceeds the per-argument limit of {limit} bytes")
            }
            DecodeError::FrameTooLarge { size, limit } => {
                write!(f, "command of at least {size} bytes exceeds the limit of {limit} bytes")
            }
            DecodeError::NullBulk => f.write_str("a null bulk string ($-1) is not a valid command argument"),
            DecodeError::NegativeLength { what } => write!(f, "negative {what}"),
            DecodeError::MalformedLength { what, reason } => {
                write!(f, "malformed {what}: {reason}")
            }
            DecodeError::MissingCrlf { len } => {
                write!(f, "bulk string of {len} bytes is not followed by CRLF")
            }
            DecodeError::LineTooLong { what, limit } => {
                write!(f, "{what} is not terminated by CRLF within {limit} bytes")
            }
            DecodeError::Truncated => f.write_str("connection closed in the middle of a command"),
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DecodeError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for DecodeError {
    fn from(e: std::io::Error) -> Self {
        DecodeError::Io(e)
    }
}

/// Where the decoder is inside the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between commands: expecting `*` or an inline line.
    Start,
    /// Inside an array, expecting a `$<len>\r\n` header; `remaining` >= 1
    /// arguments still to come.
    Header { remaining: usize },
    /// Header consumed; waiting for `len` payload bytes plus CRLF.
    Body { remaining: usize, len: usize },
}

/// Which kind of length line is being parsed.
#[derive(Clone, Copy)]
enum What {
    Array,
    Bulk,
}

impl What {
    fn length(self) -> &'static str {
        match self {
            What::Array => "array length",
            What::Bulk => "bulk string length",
        }
    }
    fn line(self) -> &'static str {
        match self {
            What::Array => "array header",
            What::Bulk => "bulk string header",
        }
    }
}

/// A parsed length: `-1` or a non-negative value.
enum Len {
    Null,
    Value(u64),
}

/// Parses the digits of a length line by hand (no UTF-8 check, no allocation).
fn parse_len(digits: &[u8], what: What) -> Result<Len, DecodeError> {
    let malformed = |reason| DecodeError::MalformedLength { what: what.length(), reason };
    match digits {
        [] => Err(malformed("no digits")),
        b"-1" => Ok(Len::Null),
        [b'-', rest @ ..] if !rest.is_empty() && rest.iter().all(u8::is_ascii_digit) => {
            Err(DecodeError::NegativeLength { what: what.length() })
        }
        _ => {
            let mut value: u64 = 0;
            for &b in digits {
                if !b.is_ascii_digit() {
                    return Err(malformed("contains a byte that is not a decimal digit"));
                }
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(b - b'0')))
                    .ok_or_else(|| malformed("does not fit in 64 bits"))?;
            }
            Ok(Len::Value(value))
        }
    }
}

/// Result of looking at an inline line.
enum Inline {
    Command(Vec<Bytes>),
    Empty,
    Incomplete,
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Byte ranges of the blank-separated words of `line`.
fn words(line: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < line.len() && is_blank(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return None;
        }
        let start = i;
        while i < line.len() && !is_blank(line[i]) {
            i += 1;
        }
        Some(start..i)
    })
}

/// Decodes RESP2 commands into their arguments; see the [module docs](self).
///
/// Yields one `Vec<Bytes>` (never empty) per command. Empty arrays (`*0\r\n`)
/// and null arrays (`*-1\r\n`) are skipped, as Redis does, and so are empty
/// inline lines. An inline command is any line, between commands, that does
/// not start with `*`; it ends at LF (a CR before it is dropped) and is split
/// on spaces and tabs, without interpreting quotes.
#[derive(Debug)]
pub struct CommandDecoder {
    limits: Limits,
    state: State,
    /// Positions, in the buffer, of the completed arguments of the array in
    /// progress. Reused from command to command.
    ranges: Vec<Range<usize>>,
    /// Bytes of the array in progress parsed so far (it starts at offset 0 of
    /// the buffer and stays there until complete). In [`State::Body`] this
    /// is where the payload starts.
    pos: usize,
    /// Bytes after `pos` (or, between commands, at the front of the buffer)
    /// already searched for `\n` without success.
    scanned: usize,
    /// Bytes examined so far (test-only), to prove linear work.
    #[cfg(test)]
    inspected: usize,
}

impl Default for CommandDecoder {
    /// A decoder with [`Limits::default`].
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl CommandDecoder {
    /// Creates a decoder enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        CommandDecoder {
            limits,
            state: State::Start,
            ranges: Vec::new(),
            pos: 0,
            scanned: 0,
            #[cfg(test)]
            inspected: 0,
        }
    }

    #[inline(always)]
    fn count(&mut self, _bytes: usize) {
        #[cfg(test)]
        {
            self.inspected += _bytes;
        }
    }

    /// Index of the first `\n` in `src[..limit]`, resuming the search after
    /// the prefix that earlier calls already searched.
    #[inline]
    fn find_lf(&mut self, src: &[u8], limit: usize) -> Option<usize> {
        let end = src.len().min(limit);
        let start = self.scanned.min(end);
        match src[start..end].iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.count(i + 1);
                self.scanned = 0;
                Some(start + i)
            }
            None => {
                self.count(end - start);
                self.scanned = end;
                None
            }
        }
    }

    /// Parses a `<marker><len>\r\n` line at the front of `src` without
    /// consuming it; returns the length and the line's size.
    #[inline]
    fn length_line(&mut self, src: &[u8], what: What) -> Result<Option<(Len, usize)>, DecodeError> {
        let Some(lf) = self.find_lf(src, MAX_LENGTH_LINE) else {
            if src.len() >= MAX_LENGTH_LINE {
                return Err(DecodeError::LineTooLong { what: what.line(), limit: MAX_LENGTH_LINE });
            }
            return Ok(None);
        };
        if lf < 2 || src[lf - 1] != b'\r' {
            return Err(DecodeError::MalformedLength {
                what: what.length(),
                reason: "line ends with a bare LF instead of CRLF",
            });
        }
        let digits = &src[1..lf - 1];
        self.count(digits.len());
        Ok(Some((parse_len(digits, what)?, lf + 1)))
    }

    /// Handles a line that does not start with `*`.
    fn inline(&mut self, src: &mut BytesMut) -> Result<Inline, DecodeError> {
        let max_frame = self.limits.max_frame;
        let Some(lf) = self.find_lf(src, max_frame) else {
            if src.len() >= max_frame {
                return Err(DecodeError::LineTooLong { what: "inline command", limit: max_frame });
            }
            return Ok(Inline::Incomplete);
        };
        let line = src.split_to(lf + 1).freeze();
        let end = if lf > 0 && line[lf - 1] == b'\r' { lf - 1 } else { lf };
        let text = &line[..end];
        self.count(2 * text.len());
        let count = words(text).count();
        if count == 0 {
            return Ok(Inline::Empty);
        }
        if count > self.limits.max_args {
            return Err(DecodeError::TooManyArgs { count: count as u64, limit: self.limits.max_args });
        }
        let mut args = Vec::with_capacity(count);
        for word in words(text) {
            if word.len() > self.limits.max_bulk {
                return Err(DecodeError::ArgTooLarge { len: word.len() as u64, limit: self.limits.max_bulk });
            }
            args.push(line.slice(word));
        }
        Ok(Inline::Command(args))
    }
}

impl Decoder for CommandDecoder {
    type Item = Vec<Bytes>;
    type Error = DecodeError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Vec<Bytes>>, DecodeError> {
        loop {
            match self.state {
                State::Start => {
                    let Some(&first) = src.first() else {
                        return Ok(None);
                    };
                    if first != b'*' {
                        match self.inline(src)? {
                            Inline::Command(args) => return Ok(Some(args)),
                            Inline::Empty => continue,
                            Inline::Incomplete => return Ok(None),
                        }
                    }
                    let Some((len, line)) = self.length_line(src, What::Array)? else {
                        return Ok(None);
                    };
                    let n = match len {
                        Len::Null | Len::Value(0) => {
                            src.advance(line);
                            continue;
                        }
                        Len::Value(n) => n,
                    };
                    if n > self.limits.max_args as u64 {
                        return Err(DecodeError::TooManyArgs { count: n, limit: self.limits.max_args });
                    }
                    if line > self.limits.max_frame {
                        return Err(DecodeError::FrameTooLarge { size: line, limit: self.limits.max_frame });
                    }
                    let n = n as usize; // <= max_args
                    self.pos = line;
                    self.ranges.clear();
                    self.ranges.reserve(n.min(PREALLOC_ARGS));
                    self.state = State::Header { remaining: n };
                }
                State::Header { remaining } => {
                    let rest = &src[self.pos..];
                    let Some(&first) = rest.first() else {
                        return Ok(None);
                    };
                    if first != b'$' {
                        return Err(if first == b'*' {
                            DecodeError::NestedArray
                        } else {
                            DecodeError::NotBulkString { found: first }
                        });
                    }
                    let Some((len, line)) = self.length_line(rest, What::Bulk)? else {
                        return Ok(None);
                    };
                    let len = match len {
                        Len::Null => return Err(DecodeError::NullBulk),
                        Len::Value(len) => len,
                    };
                    if len > self.limits.max_bulk as u64 {
                        return Err(DecodeError::ArgTooLarge { len, limit: self.limits.max_bulk });
                    }
                    let len = len as usize; // <= max_bulk
                    let size = self.pos.saturating_add(line).saturating_add(len).saturating_add(2);
                    if size > self.limits.max_frame {
                        return Err(DecodeError::FrameTooLarge { size, limit: self.limits.max_frame });
                    }
                    self.pos += line;
                    self.state = State::Body { remaining, len };
                }
                State::Body { remaining, len } => {
                    let end = self.pos + len;
                    let need = end + 2;
                    if src.len() < need {
                        // Make room for the rest of the payload in one go.
                        src.reserve(need - src.len());
                        return Ok(None);
                    }
                    self.count(2);
                    if src[end..need] != *b"\r\n" {
                        return Err(DecodeError::MissingCrlf { len });
                    }
                    self.ranges.push(self.pos..end);
                    self.pos = need;
                    if remaining > 1 {
                        self.state = State::Header { remaining: remaining - 1 };
                        continue;
                    }
                    let frame = src.split_to(need).freeze();
                    let args = self.ranges.drain(..).map(|r| frame.slice(r)).collect();
                    if self.ranges.capacity() > 4 * PREALLOC_ARGS {
                        // Do not keep a large one-off allocation per connection.
                        self.ranges = Vec::new();
                    }
                    self.pos = 0;
                    self.state = State::Start;
                    return Ok(Some(args));
                }
            }
        }
    }

    /// Like [`decode`](Decoder::decode), but a command left incomplete at
    /// end of stream is [`DecodeError::Truncated`].
    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Vec<Bytes>>, DecodeError> {
        match self.decode(src)? {
            Some(args) => Ok(Some(args)),
            None if src.is_empty() && self.state == State::Start => Ok(None),
            None => Err(DecodeError::Truncated),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Cmd = Vec<Vec<u8>>;

    fn encode_into(out: &mut Vec<u8>, cmd: &[impl AsRef<[u8]>]) {
        out.extend_from_slice(format!("*{}\r\n", cmd.len()).as_bytes());
        for arg in cmd {
            let arg = arg.as_ref();
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
    }

    fn encode(cmd: &[impl AsRef<[u8]>]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_into(&mut out, cmd);
        out
    }

    fn cmd(words: &[&str]) -> Cmd {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    /// What a stream decodes to: the commands, then the error if any.
    #[derive(Debug, PartialEq, Eq)]
    struct Outcome {
        cmds: Vec<Cmd>,
        error: Option<String>,
    }

    /// Feeds `input` in chunks whose sizes come from `next_chunk`, decoding
    /// after every chunk until the decoder needs more or fails.
    fn run(dec: &mut CommandDecoder, input: &[u8], mut next_chunk: impl FnMut() -> usize) -> Outcome {
        let limits = dec.limits;
        let mut buf = BytesMut::new();
        let mut cmds = Vec::new();
        let mut pos = 0;
        loop {
            loop {
                match dec.decode(&mut buf) {
                    Ok(Some(args)) => {
                        assert!(!args.is_empty());
                        assert!(args.len() <= limits.max_args);
                        assert!(args.iter().all(|a| a.len() <= limits.max_bulk));
                        let total: usize = args.iter().map(Bytes::len).sum();
                        assert!(total <= limits.max_frame);
                        cmds.push(args.iter().map(|a| a.to_vec()).collect());
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let msg = e.to_string();
                        assert!(!msg.chars().any(char::is_control), "{msg:?}");
                        return Outcome { cmds, error: Some(msg) };
                    }
                }
            }
            if pos == input.len() {
                return Outcome { cmds, error: None };
            }
            let n = next_chunk().clamp(1, input.len() - pos);
            buf.extend_from_slice(&input[pos..pos + n]);
            pos += n;
        }
    }

    fn whole(limits: Limits, input: &[u8]) -> Outcome {
        run(&mut CommandDecoder::new(limits), input, || usize::MAX)
    }

    fn bytewise(limits: Limits, input: &[u8]) -> Outcome {
        run(&mut CommandDecoder::new(limits), input, || 1)
    }

    fn ok(cmds: Vec<Cmd>) -> Outcome {
        Outcome { cmds, error: None }
    }

    fn err_of(limits: Limits, input: &[u8]) -> DecodeError {
        let mut dec = CommandDecoder::new(limits);
        let mut buf = BytesMut::from(input);
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("no error for {:?}", input.escape_ascii().to_string()),
                Err(e) => return e,
            }
        }
    }

    fn err(input: &[u8]) -> DecodeError {
        err_of(Limits::default(), input)
    }

    #[test]
    fn throttle_round_trip() {
        let c = cmd(&["THROTTLE", "api", "user-42", "3"]);
        let wire = encode(&c);
        assert_eq!(wire, b"*4\r\n$8\r\nTHROTTLE\r\n$3\r\napi\r\n$7\r\nuser-42\r\n$1\r\n3\r\n");
        assert_eq!(whole(Limits::default(), &wire), ok(vec![c.clone()]));
        assert_eq!(bytewise(Limits::default(), &wire), ok(vec![c]));
    }

    #[test]
    fn binary_and_empty_arguments() {
        let c: Cmd = vec![b"SET".to_vec(), vec![], b"\r\n\0*$\xff".to_vec()];
        assert_eq!(bytewise(Limits::default(), &encode(&c)), ok(vec![c]));
    }

    #[test]
    fn arguments_share_the_read_buffer() {
        let wire = encode(&cmd(&["THROTTLE", "api", "user-42", "3"]));
        let mut buf = BytesMut::from(&wire[..]);
        let start = buf.as_ptr() as usize;
        let args = CommandDecoder::default().decode(&mut buf).unwrap().unwrap();
        let inside = |b: &Bytes| {
            let p = b.as_ptr() as usize;
            p >= start && p + b.len() <= start + wire.len()
        };
        assert!(args.iter().all(inside));
    }

    fn pipeline() -> (Vec<u8>, Vec<Cmd>) {
        let cmds = vec![
            cmd(&["THROTTLE", "api", "user-42", "3"]),
            cmd(&["PING"]),
            cmd(&["THROTTLE", "login", "10.0.0.1", "1", "60"]),
            cmd(&["ECHO", ""]),
        ];
        let mut wire = Vec::new();
        for c in &cmds {
            encode_into(&mut wire, c);
        }
        wire.extend_from_slice(b"*0\r\n*-1\r\nPING\r\n\r\n  \t \r\nthrottle  api\tu-1 2\n");
        let mut expected = cmds;
        expected.push(cmd(&["PING"]));
        expected.push(cmd(&["throttle", "api", "u-1", "2"]));
        (wire, expected)
    }

    #[test]
    fn pipelined_commands_in_one_buffer() {
        let (wire, expected) = pipeline();
        assert_eq!(whole(Limits::default(), &wire), ok(expected));
    }

    #[test]
    fn split_at_every_byte_boundary() {
        let (wire, expected) = pipeline();
        assert_eq!(bytewise(Limits::default(), &wire), ok(expected.clone()));
        for split in 0..=wire.len() {
            let mut first = true;
            let mut dec = CommandDecoder::default();
            let out = run(&mut dec, &wire, || if std::mem::take(&mut first) { split.max(1) } else { usize::MAX });
            assert_eq!(out, ok(expected.clone()), "split at {split}");
        }
    }

    #[test]
    fn empty_arrays_are_skipped() {
        let out = whole(Limits::default(), b"*0\r\n*-1\r\n*0\r\n");
        assert_eq!(out, ok(vec![]));
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&b"*0\r\n*-1\r\n"[..]);
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert!(buf.is_empty());
    }

    #[test]
    fn inline_commands() {
        let out = bytewise(Limits::default(), b"PING\r\nTHROTTLE api user-42 3\r\n\r\n\n \t\r\n  get\t\tkey  \n");
        assert_eq!(out, ok(vec![cmd(&["PING"]), cmd(&["THROTTLE", "api", "user-42", "3"]), cmd(&["get", "key"]),]));
        // Incomplete line: needs more.
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&b"PIN"[..]);
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert_eq!(buf.len(), 3);
    }

    #[test]
    fn eof_handling() {
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&b"PING\r\n"[..]);
        assert_eq!(dec.decode_eof(&mut buf).unwrap().unwrap(), vec!["PING"]);
        assert!(dec.decode_eof(&mut buf).unwrap().is_none());
        for partial in [&b"*2\r\n$3\r\nfoo\r\n"[..], b"*1\r\n$3\r\nf", b"PING"] {
            let mut dec = CommandDecoder::default();
            let mut buf = BytesMut::from(partial);
            assert!(matches!(dec.decode_eof(&mut buf), Err(DecodeError::Truncated)));
        }
    }

    #[test]
    fn rejects_non_bulk_elements() {
        assert!(matches!(err(b"*2\r\n*1\r\n"), DecodeError::NestedArray));
        assert_eq!(
            err(b"*1\r\n*1\r\n$1\r\na\r\n").to_string(),
            "nested arrays are not commands: a command is a flat array of bulk strings"
        );
        for (input, found) in [
            (&b"*1\r\n:5\r\n"[..], b':'),
            (b"*1\r\n+OK\r\n", b'+'),
            (b"*1\r\n-ERR x\r\n", b'-'),
            (b"*1\r\n\r\n", b'\r'),
            (b"*2\r\n$1\r\na\r\nxyz", b'x'),
        ] {
            match err(input) {
                DecodeError::NotBulkString { found: f } => assert_eq!(f, found),
                e => panic!("{e}"),
            }
        }
        assert_eq!(
            err(b"*1\r\n:5\r\n").to_string(),
            "command arguments must be bulk strings ('$'), found an integer (':')"
        );
        assert_eq!(
            err(b"*1\r\n\r\n").to_string(),
            "command arguments must be bulk strings ('$'), found a byte that is not a RESP2 \
             type marker ('\\r')"
        );
    }

    #[test]
    fn rejects_too_many_args() {
        let e = err(b"*5000\r\n");
        assert!(matches!(e, DecodeError::TooManyArgs { count: 5000, limit: 1024 }));
        assert_eq!(e.to_string(), "array of 5000 arguments exceeds the limit of 1024");
        // Exactly at the limit is fine.
        let c: Cmd = (0..1024).map(|i| i.to_string().into_bytes()).collect();
        assert_eq!(whole(Limits::default(), &encode(&c)), ok(vec![c]));
        // Inline commands are held to the same limit.
        let small = Limits { max_args: 2, ..Limits::default() };
        assert!(matches!(err_of(small, b"a b c\r\n"), DecodeError::TooManyArgs { count: 3, limit: 2 }));
    }

    #[test]
    fn rejects_oversized_bulk() {
        let e = err(b"*1\r\n$524289\r\n");
        assert!(matches!(e, DecodeError::ArgTooLarge { len: 524_289, limit: 524_288 }));
        assert_eq!(e.to_string(), "argument of 524289 bytes exceeds the per-argument limit of 524288 bytes");
        let small = Limits { max_bulk: 3, ..Limits::default() };
        assert!(matches!(err_of(small, b"PING\r\n"), DecodeError::ArgTooLarge { len: 4, limit: 3 }));
    }

    #[test]
    fn huge_announced_bulk_is_rejected_without_buffering() {
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&b"*1\r\n$99999999999\r\n"[..]);
        assert!(matches!(dec.decode(&mut buf), Err(DecodeError::ArgTooLarge { len: 99_999_999_999, .. })));
        assert!(buf.capacity() < 64);
        // At the limit: accepted, and room is reserved only for that payload.
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&b"*1\r\n$524288\r\nab"[..]);
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() >= 524_290 && buf.capacity() < 2 * 524_290);
    }

    #[test]
    fn big_announced_array_does_not_preallocate() {
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&b"*1024\r\n"[..]);
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert!(dec.ranges.capacity() <= PREALLOC_ARGS);
    }

    #[test]
    fn rejects_oversized_frame() {
        let big = vec![b'x'; 524_288];
        let mut wire = encode(&[&big[..], &big[..]]);
        assert_eq!(wire.len(), 1_048_602);
        let e = err(&wire);
        assert!(matches!(e, DecodeError::FrameTooLarge { size: 1_048_602, limit: 1_048_576 }));
        assert_eq!(e.to_string(), "command of at least 1048602 bytes exceeds the limit of 1048576 bytes");
        // Detected from the second header alone, before its payload arrives.
        wire.truncate(4 + 9 + 524_288 + 2 + 9);
        assert!(matches!(err(&wire), DecodeError::FrameTooLarge { .. }));
        // Exactly at the limit: accepted.
        let rest = 1_048_576 - (4 + 9 + 524_288 + 2) - (9 + 2);
        let c = vec![big.clone(), vec![b'y'; rest]];
        let wire = encode(&c);
        assert_eq!(wire.len(), 1_048_576);
        assert_eq!(whole(Limits::default(), &wire), ok(vec![c]));
    }

    #[test]
    fn rejects_bad_lengths() {
        for (input, neg) in [(&b"*-2\r\n"[..], "array length"), (b"*1\r\n$-5\r\n", "bulk string length")] {
            match err(input) {
                DecodeError::NegativeLength { what } => assert_eq!(what, neg),
                e => panic!("{e}"),
            }
        }
        assert!(matches!(err(b"*1\r\n$-1\r\n"), DecodeError::NullBulk));
        for input in [
            &b"*\r\n"[..],
            b"*abc\r\n",
            b"*-\r\n",
            b"*--1\r\n",
            b"*+1\r\n",
            b"* 1\r\n",
            b"*1\r\n$1x\r\n",
            b"*1\r\n$\r\n",
            b"*3\n",
            b"*\n",
            b"*1\r\n$3\n",
            b"*1\r\n$99999999999999999999999\r\n",
            b"*1\r\n$1\r\r\n",
        ] {
            assert!(matches!(err(input), DecodeError::MalformedLength { .. }), "{}", input.escape_ascii());
        }
        assert_eq!(
            err(b"*1\r\n$\x01\x02\r\n").to_string(),
            "malformed bulk string length: contains a byte that is not a decimal digit"
        );
    }

    #[test]
    fn rejects_missing_crlf_after_bulk() {
        for input in [&b"*1\r\n$3\r\nfooXY"[..], b"*1\r\n$3\r\nfoo\n\r", b"*1\r\n$3\r\nfoo\r\r"] {
            assert!(matches!(err(input), DecodeError::MissingCrlf { len: 3 }));
        }
        assert_eq!(err(b"*1\r\n$0\r\nab").to_string(), "bulk string of 0 bytes is not followed by CRLF");
    }

    #[test]
    fn rejects_unterminated_lines() {
        let mut header = b"*".to_vec();
        header.extend_from_slice(&[b'1'; 40]);
        assert!(matches!(err(&header), DecodeError::LineTooLong { what: "array header", limit: 32 }));
        assert!(matches!(
            err(b"*1\r\n$1                                      "),
            DecodeError::LineTooLong { what: "bulk string header", .. }
        ));
        let small = Limits { max_frame: 16, ..Limits::default() };
        assert!(matches!(
            err_of(small, b"THROTTLE api user-42 3"),
            DecodeError::LineTooLong { what: "inline command", limit: 16 }
        ));
        assert_eq!(
            err_of(small, b"THROTTLE api user-42 3\r\n").to_string(),
            "inline command is not terminated by CRLF within 16 bytes"
        );
        // A line of exactly max_frame bytes, terminator included, is fine.
        assert_eq!(whole(small, b"THROTTLE api u\r\n"), ok(vec![cmd(&["THROTTLE", "api", "u"])]));
        // Default limit: a 1 MiB line without a newline is rejected.
        assert!(matches!(err(&vec![b'a'; 1 << 20]), DecodeError::LineTooLong { .. }));
    }

    #[test]
    fn error_trait_and_io_conversion() {
        let io = std::io::Error::other("boom");
        let e: DecodeError = io.into();
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e.to_string(), "I/O error: boom");
    }

    #[test]
    fn nesting_attack_fails_fast() {
        let wire = b"*1\r\n".repeat(300_000);
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::from(&wire[..]);
        assert!(matches!(dec.decode(&mut buf), Err(DecodeError::NestedArray)));
        assert!(dec.inspected < 16, "rejected after {} bytes", dec.inspected);
        // Same when it trickles in.
        let out = bytewise(Limits::default(), &wire[..64]);
        assert!(out.error.unwrap().starts_with("nested arrays"));
    }

    /// Feeds `wire` one byte at a time and returns bytes inspected.
    fn inspected_bytewise(wire: &[u8]) -> (usize, Vec<Vec<Bytes>>) {
        let mut dec = CommandDecoder::default();
        let mut buf = BytesMut::new();
        let mut items = Vec::new();
        for &b in wire {
            buf.extend_from_slice(&[b]);
            while let Some(item) = dec.decode(&mut buf).unwrap() {
                items.push(item);
            }
        }
        (dec.inspected, items)
    }

    #[test]
    fn bytewise_feeding_is_linear() {
        // ~1 MiB of many small arguments, one 512 KiB argument plus the rest,
        // and a near-1 MiB inline line.
        let many: Cmd = (0..1000).map(|i| vec![b'a' + (i % 26) as u8; 1030]).collect();
        let big: Cmd = vec![vec![b'b'; 524_288], vec![b'c'; 500_000]];
        let frames = [encode(&many), encode(&big)];
        for (wire, c) in frames.iter().zip([&many, &big]) {
            assert!(wire.len() > 1_000_000 && wire.len() <= 1 << 20);
            let (inspected, items) = inspected_bytewise(wire);
            assert_eq!(items.len(), 1);
            assert_eq!(&items[0].iter().map(|a| a.to_vec()).collect::<Cmd>(), c);
            // Headers are scanned once and parsed once; payloads are not
            // scanned at all, only their trailing CRLF.
            assert!(inspected <= 2 * wire.len(), "{inspected} for {}", wire.len());
            println!("{} byte array frame fed bytewise: {inspected} inspected", wire.len());
        }
        let mut line = Vec::new();
        for i in 0..1000 {
            line.resize(line.len() + 1040, b'a' + (i % 26) as u8);
            line.push(if i % 2 == 0 { b' ' } else { b'\t' });
        }
        line.extend_from_slice(b"\r\n");
        assert!(line.len() > 1_000_000 && line.len() <= 1 << 20);
        let (inspected, items) = inspected_bytewise(&line);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].len(), 1000);
        assert!(items[0].iter().all(|a| a.len() == 1040));
        assert!(inspected <= 3 * line.len(), "{inspected}");
        println!("{} byte inline line fed bytewise: {inspected} inspected", line.len());
    }

    // ---- random testing -------------------------------------------------

    const ALPHABET: &[u8] = b"*$:+-\r\n\r\n0123456789-1 \tab";

    fn random_command(rng: &mut fastrand::Rng) -> Vec<u8> {
        let mut out = Vec::new();
        if rng.u8(..4) == 0 {
            for _ in 0..rng.usize(0..4) {
                for _ in 0..rng.usize(0..5) {
                    out.push(rng.alphanumeric() as u8);
                }
                out.push(if rng.bool() { b' ' } else { b'\t' });
            }
            out.extend_from_slice(if rng.bool() { b"\r\n" } else { b"\n" });
        } else {
            let args: Cmd = (0..rng.usize(0..5)).map(|_| (0..rng.usize(0..12)).map(|_| rng.u8(..)).collect()).collect();
            encode_into(&mut out, &args);
        }
        out
    }

    fn random_input(rng: &mut fastrand::Rng) -> Vec<u8> {
        match rng.u8(..4) {
            0 => (0..rng.usize(0..48)).map(|_| ALPHABET[rng.usize(..ALPHABET.len())]).collect(),
            1 => (0..rng.usize(0..48)).map(|_| rng.u8(..)).collect(),
            _ => {
                let mut v = Vec::new();
                for _ in 0..rng.usize(1..4) {
                    v.extend(random_command(rng));
                }
                for _ in 0..rng.usize(0..4) {
                    let at = rng.usize(..=v.len());
                    let byte = if rng.bool() { ALPHABET[rng.usize(..ALPHABET.len())] } else { rng.u8(..) };
                    match rng.u8(..4) {
                        0 if at < v.len() => v[at] = byte,
                        1 => v.insert(at, byte),
                        2 if at < v.len() => {
                            v.remove(at);
                        }
                        _ => v.truncate(at),
                    }
                }
                v
            }
        }
    }

    fn random_limits(rng: &mut fastrand::Rng) -> Limits {
        if rng.bool() {
            Limits::default()
        } else {
            Limits { max_args: rng.usize(0..6), max_bulk: rng.usize(0..16), max_frame: rng.usize(0..64) }
        }
    }

    /// Random inputs per run of the quick test: enough for both outcomes to
    /// be well represented, in about a second of an unoptimized build.
    const RANDOM_INPUTS: usize = 100_000;

    #[test]
    fn random_bytes_never_panic_and_ignore_chunking() {
        random_bytes(0x5EED_2E5D, RANDOM_INPUTS);
    }

    fn random_bytes(seed: u64, inputs: usize) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let (mut decoded, mut failed) = (0, 0);
        for _ in 0..inputs {
            let input = random_input(&mut rng);
            let limits = random_limits(&mut rng);
            let a = whole(limits, &input);
            let b = bytewise(limits, &input);
            assert_eq!(a, b, "input {} limits {limits:?}", input.escape_ascii());
            decoded += usize::from(!a.cmds.is_empty());
            failed += usize::from(a.error.is_some());
            if rng.u8(..8) == 0 {
                let mut r = rng.fork();
                let c = run(&mut CommandDecoder::new(limits), &input, || r.usize(1..8));
                assert_eq!(a, c, "input {}", input.escape_ascii());
            }
        }
        // Both outcomes are well represented (each above a fifth of the inputs).
        assert!(decoded > inputs / 5 && failed > inputs / 5, "{decoded} {failed}");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn command() -> impl Strategy<Value = Cmd> {
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn valid_commands_decode_whatever_the_chunking(
                cmds in prop::collection::vec((command(), 0u8..4), 0..8),
                chunks in prop::collection::vec(1usize..24, 1..32),
            ) {
                let mut wire = Vec::new();
                for (c, empty) in &cmds {
                    match empty {
                        0 => wire.extend_from_slice(b"*0\r\n"),
                        1 => wire.extend_from_slice(b"*-1\r\n"),
                        _ => {}
                    }
                    encode_into(&mut wire, c);
                }
                let expected: Vec<Cmd> = cmds.into_iter().map(|(c, _)| c).collect();
                let mut i = 0;
                let out = run(&mut CommandDecoder::default(), &wire, || {
                    i += 1;
                    chunks[i % chunks.len()]
                });
                prop_assert_eq!(out, ok(expected));
            }
        }
    }
}

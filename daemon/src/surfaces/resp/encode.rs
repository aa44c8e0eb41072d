//! Replies onto the wire: RESP2 frames written straight into the
//! connection's write buffer (integers formatted with `itoa`, no
//! intermediate buffers), for every reply a command builds.

use bytes::{BufMut, BytesMut};
use redis_protocol::resp2::types::BytesFrame;
use tokio_util::codec::Encoder;

/// The connection's reply encoder.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplyEncoder;

fn line(prefix: u8, n: i64, out: &mut BytesMut) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    out.reserve(digits.len() + 3);
    out.put_u8(prefix);
    out.put_slice(digits.as_bytes());
    out.put_slice(b"\r\n");
}

/// Appends `frame`'s RESP2 encoding to `out`.
pub fn encode(frame: &BytesFrame, out: &mut BytesMut) {
    match frame {
        BytesFrame::Integer(n) => line(b':', *n, out),
        BytesFrame::SimpleString(s) => {
            out.reserve(s.len() + 3);
            out.put_u8(b'+');
            out.put_slice(s);
            out.put_slice(b"\r\n");
        }
        BytesFrame::Error(s) => {
            out.reserve(s.len() + 3);
            out.put_u8(b'-');
            out.put_slice(s.as_bytes());
            out.put_slice(b"\r\n");
        }
        BytesFrame::BulkString(b) => {
            line(b'$', b.len() as i64, out);
            out.reserve(b.len() + 2);
            out.put_slice(b);
            out.put_slice(b"\r\n");
        }
        BytesFrame::Array(items) => {
            line(b'*', items.len() as i64, out);
            for item in items {
                encode(item, out);
            }
        }
        BytesFrame::Null => out.put_slice(b"$-1\r\n"),
    }
}

impl Encoder<BytesFrame> for ReplyEncoder {
    type Error = std::io::Error;

    fn encode(&mut self, frame: BytesFrame, out: &mut BytesMut) -> Result<(), Self::Error> {
        encode(&frame, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn frames_encode_as_resp2_does() {
        let frames = [
            BytesFrame::Integer(0),
            BytesFrame::Integer(-1),
            BytesFrame::Integer(i64::MIN),
            BytesFrame::Integer(i64::MAX),
            BytesFrame::SimpleString(Bytes::from_static(b"OK")),
            BytesFrame::Error("ERR bad".into()),
            BytesFrame::BulkString(Bytes::from_static(b"a\r\nb")),
            BytesFrame::BulkString(Bytes::new()),
            BytesFrame::Null,
            BytesFrame::Array(vec![]),
            BytesFrame::Array(vec![BytesFrame::Integer(1), BytesFrame::Array(vec![BytesFrame::Null])]),
        ];
        for f in frames {
            let mut ours = BytesMut::new();
            encode(&f, &mut ours);
            let mut theirs = BytesMut::new();
            redis_protocol::resp2::encode::extend_encode(&mut theirs, &f, false).unwrap();
            assert_eq!(ours, theirs, "{f:?}");
        }
    }
}

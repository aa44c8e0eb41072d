//! One client connection: read frames, answer each in order, flush when no
//! more pipelined commands are waiting.

use bytes::BytesMut;
use futures_util::{FutureExt, SinkExt, StreamExt};
use redis_protocol::codec::Resp2;
use redis_protocol::error::{RedisProtocolError, RedisProtocolErrorKind};
use redis_protocol::resp2::types::BytesFrame;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio_util::codec::{Decoder, FramedRead, FramedWrite};

use crate::app::App;

/// Largest request accepted; a client sending more is told so and disconnected.
const MAX_FRAME: usize = 16 << 20;

/// The RESP2 codec with a bound on buffered input.
#[derive(Default)]
struct Bounded(Resp2);

impl Decoder for Bounded {
    type Item = BytesFrame;
    type Error = RedisProtocolError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesFrame>, RedisProtocolError> {
        match self.0.decode(src)? {
            None if src.len() > MAX_FRAME => {
                Err(RedisProtocolError::new(RedisProtocolErrorKind::DecodeError, "request larger than 16 MiB"))
            }
            other => Ok(other),
        }
    }
}

/// Tells a client over the connection limit why it is turned away.
pub(super) async fn refuse(mut stream: UnixStream) {
    let _ = stream.write_all(b"-ERR max connections reached; try again later\r\n").await;
}

pub(super) async fn run(stream: UnixStream, app: App, mut shutdown: watch::Receiver<bool>) {
    let (r, w) = stream.into_split();
    let mut reader = FramedRead::new(r, Bounded::default());
    let mut writer = FramedWrite::new(w, Resp2::default());
    loop {
        if *shutdown.borrow() {
            let _ = SinkExt::<BytesFrame>::flush(&mut writer).await;
            return;
        }
        // Answer pipelined commands back to back; flush before waiting for more.
        let next = match reader.next().now_or_never() {
            Some(next) => next,
            None => {
                if SinkExt::<BytesFrame>::flush(&mut writer).await.is_err() {
                    return;
                }
                tokio::select! {
                    next = reader.next() => next,
                    _ = shutdown.changed() => continue,
                }
            }
        };
        match next {
            None => return,
            Some(Err(e)) => {
                let reply =
                    BytesFrame::Error(format!("ERR protocol error: {}; closing connection", e.details()).into());
                let _ = writer.send(reply).await;
                return;
            }
            Some(Ok(frame)) => {
                let (reply, quit) = super::cmd::dispatch(&app, frame).await;
                if writer.feed(reply).await.is_err() {
                    return;
                }
                if quit {
                    let _ = SinkExt::<BytesFrame>::flush(&mut writer).await;
                    return;
                }
            }
        }
    }
}

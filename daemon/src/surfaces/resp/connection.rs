//! One client connection: read commands (with the iterative
//! [`CommandDecoder`], bounded by its [`Limits`]), answer each in order, flush
//! when no more pipelined commands are waiting. A request the decoder rejects
//! is answered with `-ERR protocol error: ...; closing connection`, then the
//! connection is closed.

use futures_util::{FutureExt, SinkExt, StreamExt};
use redis_protocol::resp2::types::BytesFrame;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::decode::{CommandDecoder, DecodeError, Limits};
use crate::app::App;

/// Tells a client over the connection limit why it is turned away.
pub(super) async fn refuse(mut stream: UnixStream) {
    let _ = stream.write_all(b"-ERR max connections reached; try again later\r\n").await;
}

pub(super) async fn run(stream: UnixStream, app: App, mut shutdown: watch::Receiver<bool>) {
    let (r, w) = stream.into_split();
    let mut reader = FramedRead::new(r, CommandDecoder::new(Limits::default()));
    let mut writer = FramedWrite::new(w, super::encode::ReplyEncoder);
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
            // The transport failed: nobody to answer.
            Some(Err(DecodeError::Io(_))) => return,
            Some(Err(e)) => {
                let reply = super::cmd::error(format!("ERR protocol error: {e}; closing connection"));
                let _ = writer.send(reply).await;
                return;
            }
            Some(Ok(args)) => {
                let (reply, quit) = super::cmd::dispatch(&app, args).await;
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

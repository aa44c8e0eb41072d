//! The socket's command decoder against the redis-protocol crate's RESP2
//! decoder (what the socket used before), side by side on the same bytes:
//! 10,000 pipelined `THROTTLE api user-N 1` commands, decoded from one
//! buffer and in 16 KiB reads. `cargo bench -p leasehold --bench resp_decode`.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use leasehold::surfaces::resp::decode::CommandDecoder;
use tokio_util::codec::Decoder;

const COMMANDS: usize = 10_000;

fn wire() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..COMMANDS {
        let user = format!("user-{i}");
        let args: [&[u8]; 4] = [b"THROTTLE", b"api", user.as_bytes(), b"1"];
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// Feeds `wire` in `chunk`-byte reads to `decoder`, decoding every complete frame.
fn run<D: Decoder>(decoder: &mut D, wire: &[u8], chunk: usize) -> usize
where
    D::Error: std::fmt::Debug,
{
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut n = 0;
    for part in wire.chunks(chunk) {
        buf.extend_from_slice(part);
        while let Some(frame) = decoder.decode(&mut buf).expect("valid input") {
            std::hint::black_box(&frame);
            n += 1;
        }
    }
    assert_eq!(n, COMMANDS);
    n
}

fn decode(c: &mut Criterion) {
    let wire = wire();
    let mut group = c.benchmark_group("decode 10k pipelined THROTTLE");
    group.throughput(Throughput::Elements(COMMANDS as u64));
    for (label, chunk) in [("one buffer", wire.len()), ("16 KiB reads", 16 * 1024)] {
        group.bench_with_input(BenchmarkId::new("leasehold CommandDecoder", label), &chunk, |b, &chunk| {
            b.iter(|| run(&mut CommandDecoder::default(), &wire, chunk));
        });
        group.bench_with_input(BenchmarkId::new("redis-protocol Resp2", label), &chunk, |b, &chunk| {
            b.iter(|| run(&mut redis_protocol::codec::Resp2::default(), &wire, chunk));
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);

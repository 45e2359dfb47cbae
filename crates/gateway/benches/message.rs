//! The reading of a message where it enters, on its own: a `tools/call` request as a client
//! sends it and the answer an echo server gives, each parsed once (`message::parse`: the text
//! flattened, checked and its head read in one serde pass).

use criterion::{Criterion, criterion_group, criterion_main};
use moniker_gateway::message;

const REQUEST: &str = r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"tool_00001","arguments":{"query":"bench"}}}"#;
const ANSWER: &str = r#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"{\"query\":\"bench\"}"}],"isError":false}}"#;

fn parse(c: &mut Criterion) {
    c.bench_function("parse a tools/call request", |b| {
        b.iter(|| message::parse(std::hint::black_box(REQUEST).to_owned()))
    });
    c.bench_function("parse an answer", |b| {
        b.iter(|| message::parse(std::hint::black_box(ANSWER).to_owned()))
    });
}

criterion_group!(benches, parse);
criterion_main!(benches);

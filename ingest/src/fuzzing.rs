//! The one entry point of the fuzz targets (`fuzz/fuzz_targets/*.rs`, run by `cargo fuzz`) and of
//! the test that replays their corpus (`fuzzing/tests.rs`): arbitrary bytes into a parser, which
//! may refuse them in any way but must never panic.

use std::io::BufRead;

use chrono::DateTime;

use crate::pipeline::Limit;
use crate::record::{CollectSink, ParseContext};

/// A parser under fuzzing: the name is the fuzz target's and its corpus folder's
/// (`fuzz/corpus/<name>/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Dcgm,
    Focus,
    Tokens,
    Events,
    RemoteWrite,
}

impl Target {
    pub const ALL: [Target; 5] = [
        Target::Dcgm,
        Target::Focus,
        Target::Tokens,
        Target::Events,
        Target::RemoteWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Dcgm => "dcgm",
            Target::Focus => "focus",
            Target::Tokens => "tokens",
            Target::Events => "events",
            Target::RemoteWrite => "remote_write",
        }
    }
}

/// Parses `data` as `target` with small batches (so that batch boundaries are fuzzed too) and the
/// limits `serve` sets. Remote-write takes `data` as it arrives over HTTP (snappy) when its first
/// byte is odd, and as the uncompressed protobuf otherwise, so that the fuzzer reaches the
/// message decoding and the sample mapping rather than spending itself on snappy's checks.
pub fn parse(target: Target, data: &[u8]) {
    let at = DateTime::from_timestamp(1_793_613_600, 0).expect("a time");
    let mut ctx = ParseContext::new("fuzz", at);
    ctx.cluster = Some("c".into());
    ctx.limits.batch_rows = 7;
    ctx.limits.max_decompressed = Some(Limit {
        bytes: 16 << 20,
        name: "--ingest-max-decompressed-mb",
    });
    let mut sink = CollectSink::default();
    let compressed;
    let mut input: &[u8] = data;
    if target == Target::RemoteWrite {
        match data.split_first() {
            Some((first, rest)) if first % 2 == 0 => {
                compressed = snap::raw::Encoder::new()
                    .compress_vec(rest)
                    .expect("snappy compresses any bytes");
                input = &compressed;
            }
            _ => input = data.get(1..).unwrap_or_default(),
        }
    }
    let input: &mut dyn BufRead = &mut input;
    // Errors are answers too: only a panic (or an abort) is a finding.
    let _ = match target {
        Target::Dcgm => crate::dcgm::parse(input, &ctx, &mut sink).map(drop),
        // FOCUS, then the provider-native bills mapped to it, each from the start of `data`.
        Target::Focus => {
            use crate::focus::{Native, parse_native};
            let _ = parse_native(&mut &data[..], &ctx, &mut sink, Native::AwsCur);
            let _ = parse_native(&mut &data[..], &ctx, &mut sink, Native::AzureEa);
            crate::focus::parse(input, &ctx, &mut sink).map(drop)
        }
        Target::Tokens => crate::tokens::parse(input, &ctx, &mut sink).map(drop),
        Target::Events => crate::events::parse(input, &ctx, &mut sink).map(drop),
        Target::RemoteWrite => crate::remote_write::parse(input, &ctx, &mut sink).map(drop),
    };
}

#[cfg(test)]
mod tests;

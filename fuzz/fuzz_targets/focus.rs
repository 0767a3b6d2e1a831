//! Arbitrary bytes into the focus parser: refusals are fine, a panic is a finding.
#![no_main]

use gpuledger_ingest::fuzzing::{Target, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| parse(Target::Focus, data));

#![no_main]
//! See `cozystack_fuzz_targets::evaluation`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_fuzz_targets::evaluation(data));

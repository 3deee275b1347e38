#![no_main]
//! See `cozystack_fuzz_targets::lists`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_fuzz_targets::lists(data));

#![no_main]
//! See `cozystack_fuzz_targets::admission`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_fuzz_targets::admission(data));

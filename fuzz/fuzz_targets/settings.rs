#![no_main]
//! See `cozystack_fuzz_targets::settings`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_fuzz_targets::settings(data));

#![no_main]
//! See `cozystack_capabilities_policy::fuzzing::lists`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_capabilities_policy::fuzzing::lists(data));

#![no_main]
//! See `cozystack_capabilities_policy::fuzzing::evaluation`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_capabilities_policy::fuzzing::evaluation(data));

#![no_main]
//! See `cozystack_capabilities_policy::fuzzing::admission`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cozystack_capabilities_policy::fuzzing::admission(data));

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cinnabar_fuzz::aof_manifest(data));

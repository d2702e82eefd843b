#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cinnabar_fuzz::restore_dump(data));

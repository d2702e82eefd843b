#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cinnabar_fuzz::rdb_file(data));

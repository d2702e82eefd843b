#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cinnabar_fuzz::cluster_message(data));

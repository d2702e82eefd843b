#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cinnabar_fuzz::lua_libs(data));

//! Builds the embedded Lua 5.1.5 from the `lua-src` crate's sources with our fixes.
//!
//! mlua links no Lua of its own (`mlua-sys`'s `external` feature): this script copies
//! the 5.1.5 sources that Cargo already holds for the `lua-src` package, applies a few
//! small edits (each one checks that its anchor text occurs exactly once, so a changed
//! source fails the build instead of silently dropping a fix) and compiles them with
//! the defines `lua-src` uses. The edits:
//!
//! * lexer: long brackets count their `=` signs in a `size_t`, and the current token
//!   starts defined, so a huge `[====[` cannot overflow the offsets used to cut the
//!   string out of the lexer's buffer (out-of-bounds read, CVE-2025-46819);
//! * parser: the chunk name is anchored on the stack for the whole parse
//!   (use-after-free if a collection ran before the main prototype holds it,
//!   CVE-2025-49844);
//! * string matching: every `match` step counts against the count hook, so the busy-
//!   script watchdog (and SCRIPT KILL) reaches a pathological `string.find`/`match`/
//!   `gmatch`/`gsub` pattern as it reaches a plain Lua loop.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `lua-src` release whose 5.1.5 sources the edits below were written against.
const LUA_SRC_VERSION: &str = "551.0.2";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let source_dir = lua_src_dir().join("lua-5.1.5");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let build_dir = out_dir.join("lua-5.1.5");
    fs::create_dir_all(&build_dir).expect("create the Lua build directory");

    let mut sources = Vec::new();
    for entry in fs::read_dir(&source_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", source_dir.display()))
    {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.ends_with(".c") || name.ends_with(".h")) {
            continue;
        }
        let text = fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let text = patch(&name, text);
        let dest = build_dir.join(&name);
        // Rewrite only on change, so an unchanged tree does not recompile Lua.
        if fs::read_to_string(&dest).ok().as_deref() != Some(text.as_str()) {
            fs::write(&dest, &text).expect("write a Lua source");
        }
        if name.ends_with(".c") {
            sources.push(dest);
        }
    }
    sources.sort();
    assert!(
        sources.iter().any(|p| p.ends_with("lstrlib.c")),
        "no Lua sources found in {}",
        source_dir.display()
    );

    let target = env::var("TARGET").expect("TARGET");
    let mut build = cc::Build::new();
    build
        .warnings(false)
        .include(&build_dir)
        .flag_if_supported("-fno-common")
        .files(&sources);
    // The platform defines `lua-src` uses for 5.1.
    if target.contains("linux")
        || target.ends_with("bsd")
        || target.contains("dragonfly")
        || target.contains("apple-darwin")
    {
        build.define("LUA_USE_LINUX", None);
    } else if target.contains("windows") {
        build.define("LUA_USE_WINDOWS", None);
    } else {
        build.define("LUA_USE_POSIX", None);
    }
    // Lua's API checks (LUA_USE_APICHECK) stay off in every profile: they abort on
    // Lua 5.1's own `pcall` returning many results (`pcall(unpack, t)` with 20+ items).
    // Test builds still get an optimised interpreter.
    if matches!(env::var("OPT_LEVEL").as_deref(), Ok("0") | Ok("1")) {
        build.opt_level(2);
    }
    build.cargo_metadata(false).compile("cinnabar_lua");

    // mlua's references to the Lua API come later on the link line than this crate:
    // the whole archive keeps every symbol they need.
    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!("cargo:rustc-link-lib=static:+whole-archive=cinnabar_lua");
}

/// The directory of the `lua-src` package in Cargo's sources, from `cargo metadata`
/// (offline first: a full crates cache needs no network).
fn lua_src_dir() -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let target = env::var("TARGET").expect("TARGET");
    let mut last_error = String::new();
    for offline in [true, false] {
        let mut cmd = Command::new(&cargo);
        cmd.arg("metadata")
            .args(["--format-version", "1", "--filter-platform", &target])
            .arg("--manifest-path")
            .arg(manifest.join("Cargo.toml"));
        if offline {
            cmd.arg("--offline");
        }
        match cmd.output() {
            Ok(out) if out.status.success() => {
                let json = String::from_utf8_lossy(&out.stdout);
                let path = package_manifest_path(&json, "lua-src", LUA_SRC_VERSION)
                    .unwrap_or_else(|| panic!("cargo metadata lists no lua-src {LUA_SRC_VERSION}"));
                return Path::new(&path).parent().unwrap().to_path_buf();
            }
            Ok(out) => last_error = String::from_utf8_lossy(&out.stderr).into_owned(),
            Err(e) => last_error = e.to_string(),
        }
    }
    panic!("cargo metadata failed: {last_error}");
}

/// The `manifest_path` of package `name`/`version` in `cargo metadata`'s JSON.
fn package_manifest_path(json: &str, name: &str, version: &str) -> Option<String> {
    let key = format!("\"name\":\"{name}\",\"version\":\"{version}\"");
    let start = json.find(&key)?;
    let rest = &json[start..];
    let field = "\"manifest_path\":\"";
    let at = rest.find(field)? + field.len();
    let mut path = String::new();
    let mut chars = rest[at..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(path),
            '\\' => path.push(chars.next()?),
            c => path.push(c),
        }
    }
    None
}

/// Applies our edits to one source file.
fn patch(name: &str, text: String) -> String {
    match name {
        "llex.c" => patch_lexer(text),
        "lparser.c" => patch_parser(text),
        "lstrlib.c" => patch_string_matching(text),
        _ => text,
    }
}

/// Replaces the single occurrence of `from` in `text` by `to`; the build fails when
/// `from` does not occur exactly once.
fn replace_once(file: &str, text: String, from: &str, to: &str) -> String {
    let count = text.matches(from).count();
    assert!(
        count == 1,
        "{file}: expected the anchor text exactly once, found it {count} times:\n{from}"
    );
    text.replacen(from, to, 1)
}

/// CVE-2025-46819. `skip_sep` returned the count of `=` as an `int` (negative for a
/// malformed bracket) and the string was cut at `2 + sep`: past 2^30 signs the
/// arithmetic overflows and the lexer reads outside its buffer. The count becomes a
/// `size_t` encoded as `count + 2` for a well-formed bracket, 1 for a lone bracket and 0
/// for `[=` without its second bracket. The current token also starts defined, so an
/// error before the first token never formats an uninitialised one.
fn patch_lexer(text: String) -> String {
    let f = "llex.c";
    let text = replace_once(
        f,
        text,
        "  ls->decpoint = '.';\n",
        "  ls->t.token = 0;  /* no token read yet */\n  ls->decpoint = '.';\n",
    );
    let text = replace_once(
        f,
        text,
        "static int skip_sep (LexState *ls) {\n  int count = 0;",
        "static size_t skip_sep (LexState *ls) {\n  size_t count = 0;",
    );
    let text = replace_once(
        f,
        text,
        "  return (ls->current == s) ? count : (-count) - 1;\n",
        "  return (ls->current == s) ? count + 2 : (count == 0) ? 1 : 0;\n",
    );
    let text = replace_once(
        f,
        text,
        "static void read_long_string (LexState *ls, SemInfo *seminfo, int sep) {",
        "static void read_long_string (LexState *ls, SemInfo *seminfo, size_t sep) {",
    );
    // Lua 5.1's deprecation of nested `[[` applies to brackets without `=` (now 2).
    let text = replace_once(
        f,
        text,
        "          if (sep == 0)\n            luaX_lexerror(ls, \"nesting of [[...]] is deprecated\", '[');",
        "          if (sep == 2)\n            luaX_lexerror(ls, \"nesting of [[...]] is deprecated\", '[');",
    );
    let text = replace_once(
        f,
        text,
        "luaZ_buffer(ls->buff) + (2 + sep),\n                                     luaZ_bufflen(ls->buff) - 2*(2 + sep));",
        "luaZ_buffer(ls->buff) + sep,\n                                     luaZ_bufflen(ls->buff) - 2*sep);",
    );
    let text = replace_once(
        f,
        text,
        "          int sep = skip_sep(ls);\n          luaZ_resetbuffer(ls->buff);  /* `skip_sep' may dirty the buffer */\n          if (sep >= 0) {",
        "          size_t sep = skip_sep(ls);\n          luaZ_resetbuffer(ls->buff);  /* `skip_sep' may dirty the buffer */\n          if (sep >= 2) {",
    );
    replace_once(
        f,
        text,
        "        int sep = skip_sep(ls);\n        if (sep >= 0) {\n          read_long_string(ls, seminfo, sep);\n          return TK_STRING;\n        }\n        else if (sep == -1) return '[';",
        "        size_t sep = skip_sep(ls);\n        if (sep >= 2) {\n          read_long_string(ls, seminfo, sep);\n          return TK_STRING;\n        }\n        else if (sep == 1) return '[';",
    )
}

/// CVE-2025-49844. `luaY_parser` interned the chunk name and kept it only in the lexer
/// state until the main prototype held it: nothing marked it for the collector. It is
/// now pushed on the stack first and popped when the parse ends (an error unwinds the
/// stack anyway).
fn patch_parser(text: String) -> String {
    let f = "lparser.c";
    let text = replace_once(
        f,
        text,
        "  struct FuncState funcstate;\n  lexstate.buff = buff;\n  luaX_setinput(L, &lexstate, z, luaS_new(L, name));\n",
        "  struct FuncState funcstate;\n  TString *tname = luaS_new(L, name);\n  setsvalue2s(L, L->top, tname);  /* anchor the chunk name */\n  incr_top(L);\n  lexstate.buff = buff;\n  luaX_setinput(L, &lexstate, z, tname);\n",
    );
    replace_once(
        f,
        text,
        "  lua_assert(lexstate.fs == NULL);\n  return funcstate.f;\n",
        "  lua_assert(lexstate.fs == NULL);\n  L->top--;  /* the chunk name */\n  return funcstate.f;\n",
    )
}

/// A pattern such as `string.rep('a*', 30) .. 'b'` against a long subject runs for
/// minutes inside one C call, where the VM's count hook never fires. Each call of
/// `match` now counts as one instruction for the count hook (and calls a line hook
/// directly), so the hook can stop the script: its error unwinds `match` by longjmp
/// like any Lua error, and the subject and pattern stay anchored on the stack.
fn patch_string_matching(text: String) -> String {
    let f = "lstrlib.c";
    let text = replace_once(
        f,
        text,
        "#include \"lualib.h\"\n",
        "#include \"lualib.h\"\n\n#include \"ldebug.h\"\n#include \"ldo.h\"\n#include \"lstate.h\"\n\n\
/* Lets the debug hook run during a long match, as the VM does between instructions. */\n\
static void match_hook (lua_State *L) {\n\
  if ((L->hookmask & LUA_MASKCOUNT) && --L->hookcount == 0) {\n\
    resethookcount(L);\n\
    luaD_callhook(L, LUA_HOOKCOUNT, -1);\n\
  }\n\
  else if (L->hookmask & LUA_MASKLINE)\n\
    luaD_callhook(L, LUA_HOOKCOUNT, -1);\n\
}\n",
    );
    replace_once(
        f,
        text,
        "static const char *match (MatchState *ms, const char *s, const char *p) {\n  init:",
        "static const char *match (MatchState *ms, const char *s, const char *p) {\n  if (ms->L->hookmask) match_hook(ms->L);\n  init:",
    )
}

//! The `cinnabar` binary, used exactly like `redis-server`:
//! `cinnabar [/path/to/redis.conf] [--directive value ...]`.

use cinnabar::config::Config;

#[global_allocator]
static GLOBAL: cinnabar::alloc::CountingAlloc = cinnabar::alloc::CountingAlloc;

fn main() {
    let mut argv = std::env::args();
    let argv0 = argv.next().unwrap_or_default();
    let args: Vec<String> = argv.collect();
    // Before any thread and before the title is first set (process.rs).
    cinnabar::process::init_title_area(&argv0);
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!(
            "Cinnabar server v={} (Redis {} compatible)",
            cinnabar::VERSION,
            cinnabar::commands::connection::REDIS_VERSION
        );
        return;
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("Usage: cinnabar [/path/to/redis.conf] [options]\n       cinnabar -v or --version\n       cinnabar -h or --help\n\nExamples:\n       cinnabar (run the server with default config)\n       cinnabar /etc/redis/6379.conf\n       cinnabar --port 7777\n       cinnabar /etc/myredis.conf --loglevel verbose");
        return;
    }
    let config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if config.port == 0
        && cinnabar::tls::port(&config) == 0
        && config.stored_str("unixsocket").is_empty()
    {
        eprintln!("Configured to not listen anywhere, exiting.");
        std::process::exit(1);
    }
    if config.daemonize {
        // SAFETY: called before any thread is started; daemon() forks and detaches,
        // keeping the working directory (nochdir = 1) and sending stdio to /dev/null.
        if unsafe { libc::daemon(1, 0) } != 0 {
            eprintln!("Can't daemonize: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
    }
    if let Err(e) = cinnabar::log::configure(&config.loglevel, &config.logfile) {
        eprintln!("Can't open the log file: {e}");
        std::process::exit(1);
    }
    cinnabar::log::install_panic_hook();
    cinnabar::crash::set_crash_log(config.stored_bool("crash-log-enabled"));
    cinnabar::crash::install();
    if config.stored_bool("syslog-enabled") {
        cinnabar::log::open_syslog(
            &config.stored_str("syslog-ident"),
            &config.stored_str("syslog-facility"),
        );
    }
    cinnabar::process::apply_disable_thp(&config);
    if let Err(e) = cinnabar::process::apply_oom_score_adj(&config, config.replicaof.is_some()) {
        cinnabar::log::warning(&e);
    }
    if let Err(e) = std::env::set_current_dir(&config.dir) {
        eprintln!("Can't chdir to '{}': {e}", config.dir.display());
        std::process::exit(1);
    }
    if !config.pidfile.is_empty() {
        let _ = std::fs::write(&config.pidfile, format!("{}\n", std::process::id()));
    }
    cinnabar::log::notice(&format!(
        "Cinnabar {} starting, pid={}",
        cinnabar::VERSION,
        std::process::id()
    ));
    let pidfile = config.pidfile.clone();
    cinnabar::affinity::configure(
        &config.stored_str("server-cpulist"),
        &config.stored_str("bio-cpulist"),
        &config.stored_str("aof-rewrite-cpulist"),
        &config.stored_str("bgsave-cpulist"),
    );
    let mut server = match cinnabar::net::Server::bind(config) {
        Ok(s) => s,
        Err(e) => {
            cinnabar::log::warning(&e.to_string());
            std::process::exit(1);
        }
    };
    if server.ex.config.stored_bool("set-proc-title") {
        cinnabar::process::set_proc_title(&server.ex.config);
    }
    cinnabar::process::show_banner(&server.ex.config);
    cinnabar::log::notice("Server initialized");
    if let Err(e) = server.load_data() {
        cinnabar::log::warning(&e.to_string());
        std::process::exit(1);
    }
    // After the background threads started, as Redis does: they keep the process's
    // CPUs unless `bio-cpulist` says otherwise.
    cinnabar::affinity::pin_current(cinnabar::affinity::ThreadRole::Server);
    let result = server.run();
    // The dataset is left to the kernel: freeing millions of keys one at a time would
    // only delay the exit (Redis does not free it either). Everything that must reach
    // the disk was written by the shutdown sequence.
    std::mem::forget(std::mem::take(&mut server.ex.ks.dbs));
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(&pidfile);
    }
    if let Err(e) = result {
        cinnabar::log::warning(&format!("Event loop failed: {e}"));
        std::process::exit(1);
    }
}

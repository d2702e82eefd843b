//! INFO fields Redis 7 reports that have no separate machinery here: appended to
//! their sections so the field set matches redis-server's (dashboards and exporters
//! look fields up by name). Real values where the server has them (AOF buffer,
//! main-thread CPU, network kbps, reply counters); zeros for features that do not
//! exist in this server (active defrag, I/O threads, modules, client eviction) and
//! for replication counters until replication fills them in.

use std::fmt::Write as _;

use crate::exec::Executor;

fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_THREAD is valid on Linux.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// Appends the section's extra fields to `s`.
pub fn append(ex: &Executor, section: &str, s: &mut String) {
    let mut f = |line: String| {
        s.push_str(&line);
        s.push_str("\r\n");
    };
    match section {
        "server" => {
            f("atomicvar_api:c11-builtin".into());
            f("gcc_version:0.0.0".into());
        }
        "memory" => {
            let used = crate::alloc::used_memory();
            let rss = crate::alloc::rss();
            f(format!("used_memory_startup:{}", 0));
            f(format!("used_memory_overhead:{}", 0));
            f(format!("used_memory_dataset:{used}"));
            f("used_memory_dataset_perc:100.00%".into());
            f(format!("allocator_allocated:{used}"));
            f(format!("allocator_active:{used}"));
            f(format!("allocator_resident:{rss}"));
            f("allocator_frag_ratio:1.00".into());
            f("allocator_frag_bytes:0".into());
            f(format!(
                "allocator_rss_ratio:{:.2}",
                rss as f64 / used.max(1) as f64
            ));
            f(format!("allocator_rss_bytes:{}", rss as i64 - used as i64));
            f("rss_overhead_ratio:1.00".into());
            f("rss_overhead_bytes:0".into());
            f(format!(
                "mem_fragmentation_bytes:{}",
                rss as i64 - used as i64
            ));
            f("mem_not_counted_for_evict:0".into());
            f("mem_replication_backlog:0".into());
            f("mem_total_replication_buffers:0".into());
            f("mem_clients_slaves:0".into());
            let clients: usize = ex.clients().map(|(_, c)| c.pending_output() + c.qbuf).sum();
            f(format!("mem_clients_normal:{clients}"));
            f("mem_cluster_links:0".into());
            f(format!("mem_aof_buffer:{}", ex.stream.buf.len()));
            for k in [
                "used_memory_lua",
                "used_memory_vm_eval",
                "used_memory_scripts_eval",
                "used_memory_vm_functions",
                "used_memory_vm_total",
                "used_memory_functions",
                "used_memory_scripts",
            ] {
                f(format!("{k}:0"));
            }
            f("used_memory_lua_human:0B".into());
            f("used_memory_vm_total_human:0B".into());
            f("used_memory_scripts_human:0B".into());
            f("number_of_cached_scripts:0".into());
            f("number_of_functions:0".into());
            f("number_of_libraries:0".into());
            f("active_defrag_running:0".into());
        }
        "persistence" => {
            for k in [
                "aof_last_cow_size:0",
                "aof_last_rewrite_time_sec:-1",
                "aof_current_rewrite_time_sec:-1",
                "aof_rewrites_consecutive_failures:0",
                "module_fork_in_progress:0",
                "module_fork_last_cow_size:0",
            ] {
                f(k.into());
            }
        }
        "stats" => {
            let st = &ex.stats;
            let mut line = String::new();
            let _ = write!(
                line,
                "instantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}",
                st.instantaneous_input_kbps, st.instantaneous_output_kbps
            );
            f(line);
            for k in [
                "instantaneous_input_repl_kbps:0.00",
                "instantaneous_output_repl_kbps:0.00",
                "total_net_repl_input_bytes:0",
                "total_net_repl_output_bytes:0",
                "evicted_clients:0",
                "total_eviction_exceeded_time:0",
                "current_eviction_exceeded_time:0",
                "migrate_cached_sockets:0",
                "slave_expires_tracked_keys:0",
                "active_defrag_hits:0",
                "active_defrag_misses:0",
                "active_defrag_key_hits:0",
                "active_defrag_key_misses:0",
                "total_active_defrag_time:0",
                "current_active_defrag_time:0",
                "unexpected_error_replies:0",
                "dump_payload_sanitizations:0",
                "io_threaded_reads_processed:0",
                "io_threaded_writes_processed:0",
                "reply_buffer_shrinks:0",
                "reply_buffer_expands:0",
            ] {
                f(k.into());
            }
            f(format!(
                "total_reads_processed:{}",
                st.total_reads_processed
            ));
            f(format!(
                "total_writes_processed:{}",
                st.total_writes_processed
            ));
        }
        "cpu" => {
            let (user, sys) = thread_cpu();
            f(format!("used_cpu_sys_main_thread:{sys:.6}"));
            f(format!("used_cpu_user_main_thread:{user:.6}"));
        }
        _ => {}
    }
}

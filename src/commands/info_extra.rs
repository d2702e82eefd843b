//! INFO fields Redis 7 reports that have no separate machinery here: appended to
//! their sections so the field set matches redis-server's (dashboards and exporters
//! look fields up by name). Real values where the server has them (the memory
//! report's overhead/dataset split, script caches and Lua VMs, AOF rewrite times,
//! main-thread CPU, network kbps, reply counters); zeros for features that do not
//! exist in this server (active defrag, I/O threads, modules, client eviction,
//! jemalloc's muzzy pages) and for replication counters until replication fills
//! them in.

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
        "debug" => {
            let st = &ex.stats;
            let lua = ex
                .scripting
                .as_ref()
                .map_or(0, |e| e.eval.lua.used_memory());
            f("# Debug".into());
            f(format!(
                "eventloop_duration_aof_sum:{}",
                st.eventloop_aof_ns / 1000
            ));
            f(format!(
                "eventloop_duration_cron_sum:{}",
                st.eventloop_cron_ns / 1000
            ));
            f(format!("eventloop_duration_max:{}", st.eventloop_max_usec));
            // Cinnabar's own: time the loop spent waiting for I/O threads' batches.
            f(format!(
                "eventloop_duration_io_wait_sum:{}",
                st.io_threads_wait_ns / 1000
            ));
            f(format!(
                "eventloop_cmd_per_cycle_max:{}",
                st.eventloop_cmd_per_cycle_max
            ));
            // The Lua VM allocates through the process allocator: no separate arena.
            f(format!("allocator_allocated_lua:{lua}"));
            f(format!("allocator_active_lua:{lua}"));
            f(format!("allocator_resident_lua:{lua}"));
            f("allocator_frag_bytes_lua:0".into());
        }
        "server" => {
            f("atomicvar_api:c11-builtin".into());
            f("gcc_version:0.0.0".into());
        }
        "memory" => {
            // Real figures from the memory report (`memory_report.rs` says how the
            // overhead is counted).
            let m = super::memory_report::MemReport::new(ex);
            let human = crate::alloc::human_bytes;
            f(format!("used_memory_startup:{}", m.startup));
            f(format!("used_memory_overhead:{}", m.overhead));
            f(format!("used_memory_dataset:{}", m.dataset));
            f(format!("used_memory_dataset_perc:{:.2}%", m.dataset_perc()));
            f(format!("allocator_allocated:{}", m.used));
            f(format!("allocator_active:{}", m.allocator));
            f(format!("allocator_resident:{}", m.allocator));
            f("allocator_muzzy:0".into());
            let (frag, frag_bytes) = m.allocator_frag();
            f(format!("allocator_frag_ratio:{frag:.2}"));
            f(format!("allocator_frag_bytes:{frag_bytes}"));
            // mimalloc's committed pages are what it holds resident (no separate
            // active/resident split as jemalloc has).
            f("allocator_rss_ratio:1.00".into());
            f("allocator_rss_bytes:0".into());
            let (rss_over, rss_over_bytes) = m.rss_overhead();
            f(format!("rss_overhead_ratio:{rss_over:.2}"));
            f(format!("rss_overhead_bytes:{rss_over_bytes}"));
            f(format!("mem_fragmentation_bytes:{}", m.total_frag().1));
            f(format!(
                "mem_not_counted_for_evict:{}",
                ex.mem_not_counted_for_evict()
            ));
            f(format!("mem_replication_backlog:{}", m.backlog));
            f(format!(
                "mem_total_replication_buffers:{}",
                crate::replication::buffer::memory()
            ));
            f(format!("mem_clients_slaves:{}", m.clients_slaves));
            f(format!("mem_clients_normal:{}", m.clients_normal));
            f(format!(
                "mem_cluster_links:{}",
                crate::cluster::links_memory(ex)
            ));
            f(format!("mem_aof_buffer:{}", m.aof_buffer));
            f(format!(
                "mem_overhead_db_hashtable_rehashing:{}",
                m.rehashing
            ));
            let vm_total = m.vm_eval + m.vm_functions;
            let scripts = m.eval_caches + m.functions_caches;
            f(format!("used_memory_lua:{}", m.vm_eval));
            f(format!("used_memory_vm_eval:{}", m.vm_eval));
            f(format!("used_memory_lua_human:{}", human(m.vm_eval)));
            f(format!("used_memory_scripts_eval:{}", m.eval_caches));
            f(format!("number_of_cached_scripts:{}", m.scripts));
            f(format!("number_of_functions:{}", m.functions));
            f(format!("number_of_libraries:{}", m.libraries));
            f(format!("used_memory_vm_functions:{}", m.vm_functions));
            f(format!("used_memory_vm_total:{vm_total}"));
            f(format!("used_memory_vm_total_human:{}", human(vm_total)));
            f(format!("used_memory_functions:{}", m.functions_caches));
            f(format!("used_memory_scripts:{scripts}"));
            f(format!("used_memory_scripts_human:{}", human(scripts)));
            f("active_defrag_running:0".into());
        }
        "persistence" => {
            // The copy-on-write size of a forkless rewrite: the bytes of keys copied
            // because they were written while the base was being walked (Redis
            // measures the pages its fork child duplicated).
            f(format!(
                "aof_last_cow_size:{}",
                ex.persist.aof_last_cow_size
            ));
            f(format!(
                "aof_last_rewrite_time_sec:{}",
                ex.persist.aof_last_rewrite_secs
            ));
            let current = ex
                .persist
                .snap
                .as_ref()
                .filter(|s| s.purpose == crate::persistence::cow::Purpose::AofRewrite)
                .map_or(-1, |s| s.started.elapsed().as_secs() as i64);
            f(format!("aof_current_rewrite_time_sec:{current}"));
            for k in [
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
            ] {
                f(k.into());
            }
            f(format!("evicted_clients:{}", ex.client_mem.evicted));
            let current = st
                .eviction_exceeded_since
                .map_or(0, |t| t.elapsed().as_millis() as u64);
            let total = (st.eviction_exceeded_total.as_micros() as u64) / 1000 + current;
            f(format!("total_eviction_exceeded_time:{total}"));
            f(format!("current_eviction_exceeded_time:{current}"));
            f(format!(
                "migrate_cached_sockets:{}",
                ex.migrate.cached_sockets()
            ));
            f(format!(
                "slave_expires_tracked_keys:{}",
                ex.ks.replica_local_expires.len()
            ));
            for k in [
                "active_defrag_hits:0",
                "active_defrag_misses:0",
                "active_defrag_key_hits:0",
                "active_defrag_key_misses:0",
                "total_active_defrag_time:0",
                "current_active_defrag_time:0",
            ] {
                f(k.into());
            }
            f(format!(
                "unexpected_error_replies:{}",
                st.unexpected_error_replies
            ));
            f(format!(
                "dump_payload_sanitizations:{}",
                ex.persist.dump_payload_sanitizations
            ));
            f(format!(
                "io_threaded_reads_processed:{}",
                st.io_threaded_reads_processed
            ));
            f(format!(
                "io_threaded_writes_processed:{}",
                st.io_threaded_writes_processed
            ));
            for k in ["reply_buffer_shrinks:0", "reply_buffer_expands:0"] {
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
            f(format!(
                "evicted_scripts:{}",
                ex.scripting.as_ref().map_or(0, |e| e.evicted_scripts)
            ));
            f(format!("eventloop_cycles:{}", st.eventloop_cycles));
            f(format!("eventloop_duration_sum:{}", st.eventloop_usec));
            f(format!(
                "eventloop_duration_cmd_sum:{}",
                st.eventloop_cmd_usec
            ));
            f(format!(
                "instantaneous_eventloop_cycles_per_sec:{}",
                st.instantaneous_eventloop_cycles_per_sec
            ));
            f(format!(
                "instantaneous_eventloop_duration_usec:{}",
                st.instantaneous_eventloop_duration_usec
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

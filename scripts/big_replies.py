#!/usr/bin/env python3
"""Peak memory and other clients' worst delay while one client takes a huge reply.

    scripts/big_replies.py SERVER_BINARY PORT SCENARIO [limit]

Starts SERVER_BINARY (cinnabar, redis-server or valkey-server) on PORT, fills a small
set/zset/hash or one 1 MB string, then one client asks for a huge reply while another
sends PING every 5 ms. Prints the peak RSS and the slowest PING. SCENARIO:
  srand_huge   SRANDMEMBER s -4294967296, read slowly for DUR seconds (default 5)
  zrand_huge   ZRANDMEMBER z -9223372036854775807
  hrand_huge   HRANDFIELD h -4611686018427387903 WITHVALUES
  srand_20m    SRANDMEMBER s -20000000
  slow_reader  a pipeline of 1,000 GETs of the 1 MB value, read after 2 s
`limit` adds client-output-buffer-limit normal 64mb 32mb 10. The server is killed past
6 GB of RSS. Run each scenario against each server back to back to compare.
"""
import socket, subprocess, sys, time, threading, os, signal
# usage: measure.py BINARY PORT SCENARIO [limit]
binary, port, scen = sys.argv[1], int(sys.argv[2]), sys.argv[3]
limit = len(sys.argv) > 4 and sys.argv[4] == 'limit'
args = [binary, '--port', str(port), '--save', '', '--appendonly', 'no']
if limit:
    args += ['--client-output-buffer-limit', 'normal 64mb 32mb 10']
srv = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
def conn():
    s = socket.create_connection(('127.0.0.1', port)); s.settimeout(60); return s
def cmd(s, *a):
    out = b'*%d\r\n' % len(a)
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out += b'$%d\r\n%s\r\n' % (len(x), x)
    return out
def status(pid):
    d = {}
    for l in open('/proc/%d/status' % pid):
        k, v = l.split(':', 1); d[k] = v.strip()
    return d
c = conn()
if scen.startswith('srand') or scen.startswith('zrand') or scen.startswith('hrand'):
    for i in range(10):
        c.sendall(cmd(c, 'SADD', 's', 'member%d' % i)); c.recv(100)
        c.sendall(cmd(c, 'ZADD', 'z', i, 'member%d' % i)); c.recv(100)
        c.sendall(cmd(c, 'HSET', 'h', 'field%d' % i, 'value%d' % i)); c.recv(100)
else:
    c.sendall(cmd(c, 'SET', 'big', 'x' * (1 << 20))); c.recv(100)
stop = False; maxlat = [0.0]; rss = [0]; pings = [0]; outstanding = [None]
def probe():
    p = conn()
    while not stop:
        t = time.time(); outstanding[0] = t; p.sendall(b'PING\r\n')
        try:
            r = p.recv(100)
        except Exception:
            r = b''
        outstanding[0] = None
        if not r: break
        maxlat[0] = max(maxlat[0], time.time() - t); pings[0] += 1
        time.sleep(0.005)
def mem():
    while not stop:
        try:
            r = int(status(srv.pid)['VmRSS'].split()[0])
        except Exception:
            return
        rss[0] = max(rss[0], r)
        if r > 6_000_000:
            os.kill(srv.pid, signal.SIGKILL); print('KILLED at >6GB'); return
        time.sleep(0.01)
threading.Thread(target=probe, daemon=True).start()
threading.Thread(target=mem, daemon=True).start()
time.sleep(0.2)
b = conn()
t0 = time.time()
if scen == 'srand_huge': b.sendall(cmd(b, 'SRANDMEMBER', 's', -4294967296))
if scen == 'zrand_huge': b.sendall(cmd(b, 'ZRANDMEMBER', 'z', -9223372036854775807))
if scen == 'hrand_huge': b.sendall(cmd(b, 'HRANDFIELD', 'h', -4611686018427387903, 'WITHVALUES'))
if scen == 'srand_20m': b.sendall(cmd(b, 'SRANDMEMBER', 's', -20000000))
if scen == 'slow_reader': b.sendall(cmd(b, 'GET', 'big') * 1000)
got = 0
dur = float(os.environ.get('DUR', '5'))
if scen == 'slow_reader' or scen == 'srand_20m':
    time.sleep(2)
    b.settimeout(5)
    try:
        while True:
            d = b.recv(1 << 20)
            if not d: break
            got += len(d)
            if scen == 'slow_reader' and got >= 1000 * ((1 << 20) + 11): break
            if scen == 'srand_20m' and got > 400_000_000: break
            time.sleep(0.0005)
    except Exception as e:
        pass
else:
    b.settimeout(0.5)
    end = time.time() + dur
    while time.time() < end:
        try:
            d = b.recv(1 << 16)
            if not d: break
            got += len(d)
        except Exception:
            pass
        time.sleep(0.05)   # slow reader
time.sleep(0.2)
stop = True
if outstanding[0] is not None: maxlat[0] = max(maxlat[0], time.time() - outstanding[0]); print('PING outstanding at end')
try:
    hwm = status(srv.pid)['VmHWM']
except Exception:
    hwm = '?'
alive = srv.poll() is None
print('%s %s limit=%s: peak_rss=%.1fMB hwm=%s max_ping=%.1fms pings=%d read=%dB alive=%s' % (os.path.basename(binary), scen, limit, rss[0]/1024, hwm, maxlat[0]*1000, pings[0], got, alive))
srv.kill(); srv.wait()

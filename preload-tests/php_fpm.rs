//! php-fpm8.2 under the preload: workers dump on SIGUSR2 idle and
//! mid-request and live on, the master dumps and still reloads, SIGQUIT
//! leaves exit dumps; with ZendMM on, a C extension's allocations (sqlite3,
//! loaded with RTLD_DEEPBIND by PHP) are seen. The test talks FastCGI to
//! the pool itself. php-fpm8.2 and php8.2-sqlite3 come from
//! scripts/install-test-deps.sh (`make test`): missing, the tests fail.

use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The php-fpm under test: `HEAPLIVE_TEST_PHP_FPM` (a path, as
/// scripts/check-php-version.sh sets for a PHP built from source), else
/// Debian's php-fpm8.2.
pub(crate) fn fpm_bin() -> String {
    std::env::var("HEAPLIVE_TEST_PHP_FPM").unwrap_or_else(|_| "php-fpm8.2".into())
}

/// The php-cli under test: `HEAPLIVE_TEST_PHP`, else Debian's php8.2.
pub(crate) fn php_bin() -> String {
    std::env::var("HEAPLIVE_TEST_PHP").unwrap_or_else(|_| "php8.2".into())
}

/// (major, minor) of the php-cli under test.
pub(crate) fn php_version() -> (u32, u32) {
    let o = Command::new(php_bin())
        .args(["-r", "echo PHP_MAJOR_VERSION, ' ', PHP_MINOR_VERSION;"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", php_bin()));
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    let (a, b) = t
        .split_once(' ')
        .unwrap_or_else(|| panic!("{} -r: {t:?}", php_bin()));
    (a.parse().unwrap(), b.parse().unwrap())
}
const DEADLINE: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// A minimal FastCGI client.

const FCGI_BEGIN_REQUEST: u8 = 1;
const FCGI_END_REQUEST: u8 = 3;
const FCGI_PARAMS: u8 = 4;
const FCGI_STDIN: u8 = 5;
const FCGI_STDOUT: u8 = 6;
const FCGI_STDERR: u8 = 7;

fn fcgi_record(out: &mut Vec<u8>, kind: u8, id: u16, content: &[u8]) {
    assert!(content.len() <= 0xffff);
    let pad = (8 - content.len() % 8) % 8;
    out.extend_from_slice(&[
        1,
        kind,
        (id >> 8) as u8,
        id as u8,
        (content.len() >> 8) as u8,
        content.len() as u8,
        pad as u8,
        0,
    ]);
    out.extend_from_slice(content);
    out.extend(std::iter::repeat_n(0u8, pad));
}

fn fcgi_len(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        out.extend_from_slice(&((n as u32) | 0x8000_0000).to_be_bytes());
    }
}

/// The answer to one request: the STDOUT stream (headers and body) and the
/// STDERR stream.
pub(crate) struct Response {
    pub stdout: String,
    pub stderr: String,
    pub app_status: u32,
}

impl Response {
    pub(crate) fn body(&self) -> &str {
        self.stdout
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or(&self.stdout)
    }
}

/// Sends one GET request for `script` to 127.0.0.1:`port` and reads the
/// answer until END_REQUEST.
pub(crate) fn fcgi_get(
    port: u16,
    script: &Path,
    uri: &str,
    query: &str,
) -> Result<Response, String> {
    fcgi_get_as(
        port,
        script,
        uri,
        query,
        uri.split('?').next().unwrap_or(uri),
    )
}

/// `fcgi_get` with SCRIPT_NAME given apart from REQUEST_URI (a front
/// controller: `/index.php` serving `/api/report`).
pub(crate) fn fcgi_get_as(
    port: u16,
    script: &Path,
    uri: &str,
    query: &str,
    script_name: &str,
) -> Result<Response, String> {
    let mut s =
        TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect to {port}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let id = 1u16;
    let mut req = Vec::new();
    // role 1 = responder, flags 0 (close the connection after the request).
    fcgi_record(&mut req, FCGI_BEGIN_REQUEST, id, &[0, 1, 0, 0, 0, 0, 0, 0]);
    let script_s = script.to_str().unwrap();
    let docroot = script.parent().unwrap().to_str().unwrap();
    let params: Vec<(&str, &str)> = vec![
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_SOFTWARE", "heaplive-test"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("SERVER_NAME", "localhost"),
        ("SERVER_ADDR", "127.0.0.1"),
        ("SERVER_PORT", "80"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "40000"),
        ("REQUEST_METHOD", "GET"),
        ("REQUEST_URI", uri),
        ("SCRIPT_NAME", script_name),
        ("SCRIPT_FILENAME", script_s),
        ("DOCUMENT_ROOT", docroot),
        ("QUERY_STRING", query),
        ("CONTENT_LENGTH", "0"),
    ];
    let mut p = Vec::new();
    for (k, v) in params {
        fcgi_len(&mut p, k.len());
        fcgi_len(&mut p, v.len());
        p.extend_from_slice(k.as_bytes());
        p.extend_from_slice(v.as_bytes());
    }
    fcgi_record(&mut req, FCGI_PARAMS, id, &p);
    fcgi_record(&mut req, FCGI_PARAMS, id, &[]);
    fcgi_record(&mut req, FCGI_STDIN, id, &[]);
    s.write_all(&req).map_err(|e| format!("send: {e}"))?;

    let mut out = Vec::new();
    let mut err = Vec::new();
    loop {
        let mut h = [0u8; 8];
        s.read_exact(&mut h).map_err(|e| {
            format!(
                "read a record header: {e} (stdout so far: {:?}, stderr so far: {:?})",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            )
        })?;
        let len = u16::from_be_bytes([h[4], h[5]]) as usize;
        let mut c = vec![0u8; len + h[6] as usize];
        s.read_exact(&mut c)
            .map_err(|e| format!("read a record: {e}"))?;
        c.truncate(len);
        match h[1] {
            FCGI_STDOUT => out.extend_from_slice(&c),
            FCGI_STDERR => err.extend_from_slice(&c),
            FCGI_END_REQUEST => {
                let app_status = if c.len() >= 4 {
                    u32::from_be_bytes([c[0], c[1], c[2], c[3]])
                } else {
                    0
                };
                return Ok(Response {
                    stdout: String::from_utf8_lossy(&out).into_owned(),
                    stderr: String::from_utf8_lossy(&err).into_owned(),
                    app_status,
                });
            }
            other => return Err(format!("unexpected FastCGI record type {other}")),
        }
    }
}

// ---------------------------------------------------------------------------
// Processes.

/// (state, ppid) of `pid` from /proc, None if it does not exist.
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((state, ppid))
}

pub(crate) fn alive(pid: u32) -> bool {
    matches!(proc_stat(pid), Some((st, _)) if st != 'Z' && st != 'X')
}

/// Live children of `parent`, sorted.
pub(crate) fn children_of(parent: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| matches!(proc_stat(pid), Some((st, pp)) if pp == parent && st != 'Z'))
        .collect();
    v.sort();
    v
}

pub(crate) fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    let r = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(
        r,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// Polls `f` until it gives Some or the deadline passes.
pub(crate) fn wait_for<T>(
    what: &str,
    ctx: &dyn Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if t0.elapsed() > DEADLINE {
            panic!(
                "timed out after {:?} waiting for {what}\n{}",
                DEADLINE,
                ctx()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How a pool differs from the default one.
#[derive(Clone, Copy)]
pub(crate) struct FpmOpts {
    /// Workers (pm = static).
    pub children: usize,
    /// false: no LD_PRELOAD (for comparisons).
    pub preload: bool,
    pub memory_limit: &'static str,
    /// More lines for the pool section.
    pub pool_extra: &'static str,
    /// A second pool, `wd`, whose workers run as www-data (on
    /// `Fpm::wd_port`), next to `www` (root's when the test runs as root).
    pub www_data_pool: bool,
    /// The process manager: `static` (the workers are waited for at
    /// start), or `ondemand` (none at start; with `pool_extra`'s
    /// `pm.max_requests`, say).
    pub pm: &'static str,
}

impl Default for FpmOpts {
    fn default() -> Self {
        FpmOpts {
            children: 2,
            preload: true,
            memory_limit: "1024M",
            pool_extra: "",
            www_data_pool: false,
            pm: "static",
        }
    }
}

/// A port for a php-fpm pool: below the kernel's ephemeral range (32768
/// up), so no client socket of a parallel test takes it between this
/// check and php-fpm's bind; each port is handed out once per test
/// process, from a start that differs between processes, and only if
/// nothing listens on it now. (Port 0's pick, dropped and bound again by
/// php-fpm, raced with the ephemeral ports of parallel tests.)
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 10_000;
    let _ = NEXT.compare_exchange(
        0,
        1 + std::process::id() * 97 % SPAN,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::AcqRel) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN);
}

/// A php-fpm master started in the foreground; killed (with its workers)
/// if the test ends while it still runs.
pub(crate) struct Fpm {
    child: Child,
    dir: PathBuf,
    port: u16,
    wd_port: Option<u16>,
}

impl Fpm {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn start(dir: &Path, zend_alloc: bool, extra_env: &[(&str, &str)]) -> Fpm {
        Fpm::start_opts(dir, zend_alloc, extra_env, &FpmOpts::default())
    }

    pub(crate) fn start_opts(
        dir: &Path,
        zend_alloc: bool,
        extra_env: &[(&str, &str)],
        opts: &FpmOpts,
    ) -> Fpm {
        let FpmOpts {
            children,
            preload,
            memory_limit,
            pool_extra,
            www_data_pool,
            pm,
        } = *opts;
        require_fpm();
        let ports = [free_port(), free_port()];
        let port = ports[0];
        let root = unsafe { libc::geteuid() } == 0;
        let wd_port = www_data_pool.then(|| {
            assert!(root, "a www-data pool needs the tests to run as root");
            // The workers of that pool write their log lines here after
            // they switched user (their dumps go to /tmp: the test
            // directory is not theirs).
            let log = dir.join("heaplive.log");
            std::fs::write(&log, "").unwrap();
            std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o666))
                .unwrap();
            ports[1]
        });
        let conf = format!(
            "[global]\n\
             pid = {d}/fpm.pid\n\
             error_log = {d}/fpm.log\n\
             log_level = notice\n\
             daemonize = no\n\
             ; workers get SIGQUIT alone (not SIGTERM at once): they exit through\n\
             ; exit(), which runs the exit dump\n\
             process_control_timeout = 15s\n\
             \n\
             [www]\n\
             {user}\
             listen = 127.0.0.1:{port}\n\
             pm = {pm}\n\
             pm.max_children = {children}\n\
             pm.status_path = /fpm-status\n\
             php_admin_value[memory_limit] = {memory_limit}\n\
             php_admin_value[max_execution_time] = 0\n\
             {pool_extra}{wd}",
            d = dir.display(),
            pool_extra = pool_extra,
            wd = match wd_port {
                Some(p) => format!(
                    "\n[wd]\n\
                     user = www-data\n\
                     group = www-data\n\
                     listen = 127.0.0.1:{p}\n\
                     pm = static\n\
                     pm.max_children = {children}\n\
                     php_admin_value[memory_limit] = {memory_limit}\n\
                     php_admin_value[max_execution_time] = 0\n"
                ),
                None => String::new(),
            },
            children = children,
            memory_limit = memory_limit,
            user = if root {
                "user = root\ngroup = root\n"
            } else {
                ""
            },
        );
        std::fs::write(dir.join("fpm.conf"), conf).unwrap();
        let mut c = Command::new(fpm_bin());
        c.arg("-F")
            .arg("-y")
            .arg(dir.join("fpm.conf"))
            .arg("-p")
            .arg(dir)
            .current_dir(dir);
        if root {
            c.arg("-R");
        }
        for (k, _) in std::env::vars() {
            if k.starts_with("HEAPLIVE_") || k == "USE_ZEND_ALLOC" {
                c.env_remove(k);
            }
        }
        if preload {
            c.env("LD_PRELOAD", lib());
        } else {
            c.env_remove("LD_PRELOAD");
        }
        c.env("HEAPLIVE_OUTPUT", dir.join("fpm.%p.%n.folded"))
            .env("HEAPLIVE_LOG", dir.join("heaplive.log"));
        if !zend_alloc {
            c.env("USE_ZEND_ALLOC", "0");
        }
        for (k, v) in extra_env {
            c.env(k, v);
        }
        c.stdout(std::fs::File::create(dir.join("master.stdout")).unwrap());
        c.stderr(std::fs::File::create(dir.join("master.stderr")).unwrap());
        let child = c
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", fpm_bin()));
        let mut fpm = Fpm {
            child,
            dir: dir.to_path_buf(),
            port,
            wd_port,
        };
        let pools = if wd_port.is_some() { 2 } else { 1 };
        let master = fpm.pid();
        let ctx = fpm.ctx();
        wait_for("php-fpm: ready, all workers", &ctx, || {
            if let Ok(Some(st)) = fpm.child.try_wait() {
                panic!("{} exited at start: {st}\n{}", fpm_bin(), ctx());
            }
            let ready = std::fs::read_to_string(dir.join("fpm.log"))
                .unwrap_or_default()
                .contains("ready to handle connections");
            let workers = if pm == "static" { children * pools } else { 0 };
            (ready && children_of(master).len() == workers).then_some(())
        });
        fpm
    }

    /// Everything worth showing when something fails.
    pub(crate) fn ctx(&self) -> impl Fn() -> String + 'static {
        let dir = self.dir.clone();
        move || {
            let mut s = String::new();
            for f in ["master.stdout", "master.stderr", "fpm.log", "heaplive.log"] {
                let t = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| format!("({e})"));
                s.push_str(&format!("--- {f} ---\n{t}\n"));
            }
            let names: Vec<String> = std::fs::read_dir(&dir)
                .map(|rd| {
                    rd.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                        .collect()
                })
                .unwrap_or_default();
            s.push_str(&format!(
                "--- files in {} ---\n{:?}\n",
                dir.display(),
                names
            ));
            s
        }
    }

    /// The port of the www-data pool (`FpmOpts::www_data_pool`).
    pub(crate) fn wd_port(&self) -> u16 {
        self.wd_port.expect("started with a www-data pool")
    }

    pub(crate) fn get(&self, script: &Path) -> Response {
        self.get_on(self.port, script)
    }

    /// A request to the pool listening on `port`.
    pub(crate) fn get_on(&self, port: u16, script: &Path) -> Response {
        let name = format!("/{}", script.file_name().unwrap().to_string_lossy());
        fcgi_get(port, script, &name, "")
            .unwrap_or_else(|e| panic!("request {name}: {e}\n{}", self.ctx()()))
    }

    /// SIGQUIT, then waits for the master to exit.
    pub(crate) fn quit(&mut self) -> std::process::ExitStatus {
        kill(self.pid(), libc::SIGQUIT);
        let ctx = self.ctx();
        let child = &mut self.child;
        wait_for("the master to exit after SIGQUIT", &ctx, || {
            child.try_wait().unwrap()
        })
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // The master stopped first: a master that sees its workers die
            // forks new ones at once, and those were left behind, orphaned,
            // when the list was taken before the kill.
            unsafe { libc::kill(self.pid() as i32, libc::SIGSTOP) };
            for _ in 0..200 {
                if matches!(proc_stat(self.pid()), Some(('T', _)) | None) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            for w in children_of(self.pid()) {
                unsafe { libc::kill(w as i32, libc::SIGKILL) };
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn require_fpm() {
    let o = Command::new(fpm_bin()).arg("-v").output();
    match o {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "{} is missing or broken ({:?}): install it with scripts/install-test-deps.sh (`make test` does)",
            fpm_bin(),
            other.map(|o| o.status)
        ),
    }
}

// ---------------------------------------------------------------------------
// heaplive's log lines and files.

/// Paths of `<why>` dumps of `pid` from the HEAPLIVE_LOG lines
/// `heaplive[pid]: <why> dump <path>: ...`.
pub(crate) fn dumps_in_log(dir: &Path, pid: u32, why: &str) -> Vec<PathBuf> {
    let log = std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default();
    let prefix = format!("heaplive[{pid}]: {why} dump ");
    log.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|r| r.split_once(": ").map(|(p, _)| PathBuf::from(p)))
        .collect()
}

fn is_engine_frame(f: &str) -> bool {
    f == "execute_ex"
        || f.starts_with("zend_")
        || f.starts_with("_emalloc")
        || f == "__zend_malloc"
        || f.starts_with("ZEND_")
}

pub(crate) fn engine_bytes(stacks: &[Stack]) -> u64 {
    stacks
        .iter()
        .filter(|s| s.frames.iter().any(|f| is_engine_frame(f)))
        .map(|s| s.bytes)
        .sum()
}

fn is_sqlite_frame(f: &str) -> bool {
    f.starts_with("sqlite3") || f.contains("libsqlite3")
}

fn sqlite_bytes(stacks: &[Stack]) -> u64 {
    stacks
        .iter()
        .filter(|s| s.frames.iter().any(|f| is_sqlite_frame(f)))
        .map(|s| s.bytes)
        .sum()
}

/// The heaviest stacks of a file, for failure messages.
pub(crate) fn top_stacks(stacks: &[Stack], n: usize) -> String {
    let mut v: Vec<&Stack> = stacks.iter().collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    v.iter()
        .take(n)
        .map(|s| format!("{} {}\n", s.frames.join(";"), s.bytes))
        .collect()
}

/// A PHP script that does `work`, then says which worker it runs in
/// (writes `busy.pid`) and waits up to 15 s for the test to create
/// `release`, then runs `finish`.
pub(crate) fn holding_script(dir: &Path, name: &str, work: &str, finish: &str) -> PathBuf {
    let busy = dir.join("busy.pid");
    let release = dir.join("release");
    let text = format!(
        "<?php\n\
         {work}\n\
         file_put_contents('{busy}.tmp', getmypid());\n\
         rename('{busy}.tmp', '{busy}');\n\
         for ($i = 0; $i < 150 && !file_exists('{release}'); $i++) {{ usleep(100000); }}\n\
         {finish}\n",
        busy = busy.display(),
        release = release.display(),
    );
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `script` on a thread; waits until it has done its work and names
/// its worker. Returns the thread and the busy worker's pid.
pub(crate) fn start_holding_request(
    fpm: &Fpm,
    script: &Path,
) -> (std::thread::JoinHandle<Result<Response, String>>, u32) {
    start_holding_request_on(fpm, fpm.port, script, &fpm.dir.join("busy.pid"))
}

/// `start_holding_request` on the pool listening on `port`, for a script
/// that names its worker in `busy_file`.
pub(crate) fn start_holding_request_on(
    fpm: &Fpm,
    port: u16,
    script: &Path,
    busy_file: &Path,
) -> (std::thread::JoinHandle<Result<Response, String>>, u32) {
    let script2 = script.to_path_buf();
    let name = format!("/{}", script.file_name().unwrap().to_string_lossy());
    let h = std::thread::spawn(move || fcgi_get(port, &script2, &name, ""));
    let busy_file = busy_file.to_path_buf();
    let ctx = fpm.ctx();
    let busy = wait_for("the script to finish its work (busy.pid)", &ctx, || {
        if h.is_finished() {
            panic!("the request ended early\n{}", ctx());
        }
        std::fs::read_to_string(&busy_file)
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()
    });
    (h, busy)
}

// ---------------------------------------------------------------------------

#[test]
fn fpm_workers_and_master_dump_on_usr2_and_live() {
    let dir = tempdir("php-fpm");
    let mut fpm = Fpm::start(&dir, false, &[]);
    let ctx = fpm.ctx();
    let master = fpm.pid();
    let workers = children_of(master);
    assert_eq!(workers.len(), 2, "pm.max_children = 2\n{}", ctx());

    let big = holding_script(
        &dir,
        "big.php",
        "$a = [];\nfor ($i = 0; $i < 500000; $i++) { $a[] = str_repeat('x', 100) . $i; }",
        "echo 'done ', count($a), \"\\n\";",
    );
    let (req, busy) = start_holding_request(&fpm, &big);
    assert!(
        workers.contains(&busy),
        "the busy pid {busy} is not a worker {workers:?}\n{}",
        ctx()
    );
    let idle = *workers.iter().find(|&&w| w != busy).unwrap();

    // USR2 to the worker mid-request and to the idle one.
    kill(busy, libc::SIGUSR2);
    kill(idle, libc::SIGUSR2);
    let busy_file = wait_for("the busy worker's signal dump", &ctx, || {
        dumps_in_log(&dir, busy, "signal").into_iter().next()
    });
    let idle_file = wait_for("the idle worker's signal dump", &ctx, || {
        dumps_in_log(&dir, idle, "signal").into_iter().next()
    });
    std::fs::write(dir.join("release"), "").unwrap();
    let resp = req
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the busy request: {e}\n{}", ctx()));
    assert_eq!(
        resp.body().trim(),
        "done 500000",
        "the interrupted request's answer (status {}, stderr {:?}, stdout {:?})\n{}",
        resp.app_status,
        resp.stderr,
        resp.stdout,
        ctx()
    );
    // Both workers survived (the master would have replaced a dead one).
    for w in [busy, idle] {
        assert!(alive(w), "worker {w} died after SIGUSR2\n{}", ctx());
    }
    assert_eq!(
        children_of(master),
        workers,
        "the workers changed after SIGUSR2\n{}",
        ctx()
    );

    // One file per worker, in the output directory, named by its pid.
    assert_ne!(busy_file, idle_file);
    assert_eq!(
        busy_file,
        dir.join(format!("fpm.{busy}.1.folded")),
        "\n{}",
        ctx()
    );
    assert_eq!(
        idle_file,
        dir.join(format!("fpm.{idle}.1.folded")),
        "\n{}",
        ctx()
    );
    let busy_stacks = parse_folded(&busy_file);
    let idle_stacks = parse_folded(&idle_file);
    let eb = engine_bytes(&busy_stacks);
    assert!(
        eb >= 40_000_000,
        "the mid-request dump must show the ~60 MB array under the engine's frames; {eb} bytes (total {})\ntop stacks:\n{}\n{}",
        total(&busy_stacks),
        top_stacks(&busy_stacks, 15),
        ctx()
    );
    assert!(
        total(&idle_stacks) < 40_000_000,
        "the idle worker's file shows {} bytes: another process's memory?\n{}",
        total(&idle_stacks),
        top_stacks(&idle_stacks, 10)
    );

    // USR2 to the master: it dumps and still reloads (same pid, new workers).
    kill(master, libc::SIGUSR2);
    let master_file = wait_for("the master's signal dump", &ctx, || {
        dumps_in_log(&dir, master, "signal").into_iter().next()
    });
    parse_folded(&master_file);
    let new_workers = wait_for("new workers after the reload", &ctx, || {
        let now = children_of(master);
        (now.len() == 2
            && now.iter().all(|w| !workers.contains(w))
            && workers.iter().all(|&w| !alive(w)))
        .then_some(now)
    });
    assert!(
        alive(master),
        "the master must survive its reload\n{}",
        ctx()
    );
    wait_for("the reloaded master to say it is ready", &ctx, || {
        let log = std::fs::read_to_string(dir.join("fpm.log")).unwrap_or_default();
        (log.matches("ready to handle connections").count() >= 2).then_some(())
    });
    let hello = dir.join("hello.php");
    std::fs::write(&hello, "<?php echo 'hello from ', getmypid(), \"\\n\";\n").unwrap();
    let r = fpm.get(&hello);
    let who: u32 = r
        .body()
        .trim()
        .strip_prefix("hello from ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "after the reload: {:?} / {:?}\n{}",
                r.stdout,
                r.stderr,
                ctx()
            )
        });
    assert!(
        new_workers.contains(&who),
        "served by {who}, not a new worker {new_workers:?}"
    );

    // The old workers left with SIGQUIT at the reload: exit dumps.
    for w in &workers {
        assert_eq!(
            dumps_in_log(&dir, *w, "exit").len(),
            1,
            "old worker {w}: exit dump at the reload\n{}",
            ctx()
        );
    }

    // SIGQUIT: exit dumps for the master and the workers.
    let st = fpm.quit();
    assert!(
        st.success(),
        "the master's exit status after SIGQUIT: {st}\n{}",
        ctx()
    );
    for pid in std::iter::once(master).chain(new_workers.iter().copied()) {
        let exits = dumps_in_log(&dir, pid, "exit");
        assert_eq!(exits.len(), 1, "{pid}: one exit dump\n{}", ctx());
        // A worker with nothing live writes none ("exit dump skipped:
        // nothing live"); the master, not a fork's child, always does.
        assert!(
            exits[0].exists() || pid != master && exits[0] == Path::new("skipped"),
            "{} is missing\n{}",
            exits[0].display(),
            ctx()
        );
    }
    for f in folded_files(&dir) {
        parse_folded(&f);
    }
    let log = std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default();
    assert!(!log.contains("dump failed"), "a dump failed\n{}", ctx());
}

#[test]
fn fpm_zendmm_sqlite3_allocations_are_seen() {
    require_fpm();
    let m = Command::new(fpm_bin())
        .arg("-m")
        .output()
        .expect("php-fpm -m");
    assert!(
        String::from_utf8_lossy(&m.stdout)
            .lines()
            .any(|l| l.trim() == "sqlite3"),
        "the sqlite3 extension is missing from {} (php8.2-sqlite3; scripts/install-test-deps.sh):\n{}",
        fpm_bin(),
        String::from_utf8_lossy(&m.stdout)
    );
    let dir = tempdir("php-fpm-sqlite");
    // ZendMM on (no USE_ZEND_ALLOC); a finer sampling for a steady estimate.
    let mut fpm = Fpm::start(&dir, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")]);
    let ctx = fpm.ctx();
    let master = fpm.pid();
    let workers = children_of(master);
    // 40,000 rows of 250 bytes: about 10 MB of sqlite pages, all in memory.
    let script = holding_script(
        &dir,
        "sqlite.php",
        "$db = new SQLite3(':memory:');\n\
         $db->exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)');\n\
         $db->exec('INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) SELECT randomblob(250) FROM c');",
        "echo 'rows ', $db->querySingle('SELECT count(*) FROM t'), \"\\n\";",
    );
    let (req, busy) = start_holding_request(&fpm, &script);
    assert!(workers.contains(&busy), "{busy} not in {workers:?}");
    kill(busy, libc::SIGUSR2);
    let file = wait_for("the worker's signal dump", &ctx, || {
        dumps_in_log(&dir, busy, "signal").into_iter().next()
    });
    std::fs::write(dir.join("release"), "").unwrap();
    let resp = req
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the request: {e}\n{}", ctx()));
    assert_eq!(
        resp.body().trim(),
        "rows 40000",
        "stderr {:?}\n{}",
        resp.stderr,
        ctx()
    );
    assert!(alive(busy), "the worker died\n{}", ctx());

    let log = std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("RTLD_DEEPBIND") && l.contains("cleared")),
        "PHP loads extensions with RTLD_DEEPBIND: heaplive must say it cleared it\n{}",
        ctx()
    );
    let stacks = parse_folded(&file);
    let sq = sqlite_bytes(&stacks);
    assert!(
        sq >= 5_000_000,
        "about 10 MB of sqlite pages must show under libsqlite3's frames; {sq} bytes (total {})\ntop stacks:\n{}\n{}",
        total(&stacks),
        top_stacks(&stacks, 15),
        ctx()
    );
    let st = fpm.quit();
    assert!(st.success(), "exit status after SIGQUIT: {st}\n{}", ctx());
    assert_eq!(
        dumps_in_log(&dir, master, "exit").len(),
        1,
        "master exit dump\n{}",
        ctx()
    );
}

/// A request that holds a 67 MB PHP array (`array_fill` of 3.2 million
/// ints: one packed block of 2^22 zvals) and sleeps in `sleep(1)` calls
/// until the test creates its release file. It checks each sleep itself
/// (returned 0 and lasted at least a second by `hrtime`) and counts the
/// ones cut short. Writes its worker's pid to `busy`.
fn sleeping_array_script(dir: &Path, name: &str, busy: &Path, release: &Path) -> PathBuf {
    let text = format!(
        "<?php\n\
         $a = array_fill(0, 3200000, 7);\n\
         file_put_contents('{busy}.tmp', getmypid());\n\
         rename('{busy}.tmp', '{busy}');\n\
         $cut = 0; $n = 0;\n\
         do {{\n\
             $t = hrtime(true); $r = sleep(1); $e = hrtime(true) - $t;\n\
             if ($r !== 0 || $e < 1000000000) {{ $cut++; }}\n\
             $n++;\n\
         }} while (!file_exists('{release}') && $n < 600);\n\
         echo 'sleeps cut short: ', $cut, '; array ', count($a), ' sum ', array_sum($a), \"\\n\";\n",
        busy = busy.display(),
        release = release.display(),
    );
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Issue 17's php-fpm check, for one way of running PHP's allocator
/// (`zend_alloc`: ZendMM on, else USE_ZEND_ALLOC=0), in a pool of root's
/// and in one of www-data's: a request holds a 67 MB array and sleeps; its
/// worker gets 20 dump signals from `kill -USR2 PID` and then 20 from
/// `pkill -USR2 -P MASTER -f 'pool NAME$'` (the pool's two workers), each
/// once the previous dump of the busy worker is written. Every one of
/// its 40 dumps holds the array (default sampling: a block of 67 MB is
/// sampled with probability 1 - exp(-67 MB / 512 KiB) = 1 - e^-128, so the
/// false-failure rate is about 40 e^-128 per pool), no sleep of the
/// request was cut short (the script's own check), and the response is
/// byte for byte the one php-fpm gives without the preload.
fn fpm_request_signalled_forty_times(zend_alloc: bool) {
    let tag = if zend_alloc { "zendmm" } else { "malloc" };
    let dir = tempdir(&format!("php-fpm-sleep-{tag}"));
    // The www-data pool's script writes its files here.
    let wd_dir = dir.join("wd");
    std::fs::create_dir(&wd_dir).unwrap();
    std::fs::set_permissions(&wd_dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let pools = [("www", dir.to_path_buf()), ("wd", wd_dir)];
    let scripts: Vec<(PathBuf, PathBuf, PathBuf)> = pools
        .iter()
        .map(|(name, d)| {
            let (busy, release) = (d.join("busy.pid"), d.join("release"));
            let script = sleeping_array_script(d, &format!("{name}.php"), &busy, &release);
            (script, busy, release)
        })
        .collect();

    // The responses without the preload (release created up front: one
    // sleep each).
    let want: Vec<String> = {
        let d = tempdir(&format!("php-fpm-sleep-{tag}-plain"));
        let opts = FpmOpts {
            preload: false,
            www_data_pool: true,
            ..FpmOpts::default()
        };
        let mut fpm = Fpm::start_opts(&d, zend_alloc, &[], &opts);
        let mut v = Vec::new();
        for (i, (script, busy, release)) in scripts.iter().enumerate() {
            std::fs::write(release, "").unwrap();
            let port = if i == 0 { fpm.port } else { fpm.wd_port() };
            let r = fpm.get_on(port, script);
            assert!(
                r.body()
                    .starts_with("sleeps cut short: 0; array 3200000 sum 22400000"),
                "without the preload: {:?} / {:?}\n{}",
                r.stdout,
                r.stderr,
                fpm.ctx()()
            );
            v.push(r.stdout);
            let _ = std::fs::remove_file(release);
            let _ = std::fs::remove_file(busy);
        }
        assert!(fpm.quit().success());
        v
    };

    let opts = FpmOpts {
        www_data_pool: true,
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(&dir, zend_alloc, &[], &opts);
    let ctx = fpm.ctx();
    let master = fpm.pid();
    for (i, (script, busy_file, release)) in scripts.iter().enumerate() {
        let (pool, port) = if i == 0 {
            ("www", fpm.port)
        } else {
            ("wd", fpm.wd_port())
        };
        let (req, busy) = start_holding_request_on(&fpm, port, script, busy_file);
        let uid = std::fs::read_to_string(format!("/proc/{busy}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                Some(
                    l.strip_prefix("Uid:")?
                        .split_whitespace()
                        .next()?
                        .to_string(),
                )
            });
        assert_eq!(
            uid.as_deref(),
            Some(if i == 0 { "0" } else { "33" }),
            "{pool}: the worker's user (root, www-data)\n{}",
            ctx()
        );
        let signal_dumps = || dumps_in_log(&dir, busy, "signal");
        let before = signal_dumps().len();
        for n in 1..=40 {
            let o = if n <= 20 {
                Command::new("kill")
                    .args(["-USR2", &busy.to_string()])
                    .output()
            } else {
                Command::new("pkill")
                    .args(["-USR2", "-P", &master.to_string(), "-f"])
                    .arg(format!("pool {pool}$"))
                    .output()
            }
            .unwrap();
            assert!(o.status.success(), "{pool}: signal {n}: {}", show(&o));
            wait_for(&format!("{pool}: the busy worker's dump {n}"), &ctx, || {
                (signal_dumps().len() >= before + n).then_some(())
            });
        }
        std::fs::write(release, "").unwrap();
        let resp = req
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{pool}: the request: {e}\n{}", ctx()));
        assert_eq!(
            resp.stdout,
            want[i],
            "{pool}: the response differs from the one without the preload (stderr {:?})\n{}",
            resp.stderr,
            ctx()
        );
        assert!(alive(busy), "{pool}: the worker died\n{}", ctx());
        let files = signal_dumps();
        assert_eq!(files.len(), before + 40, "{pool}\n{}", ctx());
        for f in &files[before..] {
            let stacks = parse_folded(f);
            assert!(
                stacks.iter().any(|s| s.bytes >= 64 << 20),
                "{pool}: {} does not hold the 67 MB array\ntop stacks:\n{}\n{}",
                f.display(),
                top_stacks(&stacks, 5),
                ctx()
            );
        }
    }
    let st = fpm.quit();
    assert!(st.success(), "exit status after SIGQUIT: {st}\n{}", ctx());
    let log = std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default();
    // The www-data workers' files went to /tmp (the test directory is
    // root's): every file a log line names outside it, and its views.
    for word in log.split_whitespace() {
        let f = word.trim_end_matches(':');
        if let Some(stem) = f.strip_suffix(".folded")
            && f.starts_with("/tmp/fpm.")
            && !Path::new(f).starts_with(&*dir)
        {
            for v in ["", ".alloc", ".samples", ".peak"] {
                let _ = std::fs::remove_file(format!("{stem}{v}.folded"));
            }
        }
    }
    assert!(!log.contains("dump failed"), "a dump failed\n{}", ctx());
}

#[test]
fn fpm_zendmm_request_sleep_is_not_cut_and_forty_dumps_hold_the_array() {
    fpm_request_signalled_forty_times(true);
}

#[test]
fn fpm_malloc_request_sleep_is_not_cut_and_forty_dumps_hold_the_array() {
    fpm_request_signalled_forty_times(false);
}

//! php-fpm pools: a master started in the foreground with its own
//! configuration ([`Fpm`], [`FpmOpts`]), killed with its workers when the
//! test ends, and requests held open mid-script ([`start_holding_request`]).

use super::{
    Response, children_of, clean_env, fcgi_get, fpm_bin, kill, proc_stat, require_fpm, wait_for,
};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

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
        clean_env(&mut c);
        if preload {
            c.env("LD_PRELOAD", lib());
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

/// A [`holding_script`] `name` (`work`, then `finish`) in the pool's
/// directory, started ([`start_holding_request`]) on one of `workers`: the
/// request's thread and its worker.
pub(crate) fn hold_request(
    fpm: &Fpm,
    name: &str,
    work: &str,
    finish: &str,
    workers: &[u32],
) -> (std::thread::JoinHandle<Result<Response, String>>, u32) {
    let script = holding_script(&fpm.dir, name, work, finish);
    let (req, busy) = start_holding_request(fpm, &script);
    assert!(
        workers.contains(&busy),
        "the busy pid {busy} is not a worker {workers:?}\n{}",
        fpm.ctx()()
    );
    (req, busy)
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

/// Creates `release` in the pool's directory (where a [`holding_script`]
/// looks for it) and waits for the held request's answer; a failed request
/// panics naming `what`.
pub(crate) fn release_request(
    fpm: &Fpm,
    req: std::thread::JoinHandle<Result<Response, String>>,
    what: &str,
) -> Response {
    std::fs::write(fpm.dir.join("release"), "").unwrap();
    req.join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", fpm.ctx()()))
}

/// [`release_request`], asserting that the answer's body (trimmed) is
/// `want`; the message names `what`, the answer's status, stderr and
/// stdout, and the pool's state.
pub(crate) fn release_expecting(
    fpm: &Fpm,
    req: std::thread::JoinHandle<Result<Response, String>>,
    what: &str,
    want: &str,
) -> Response {
    let resp = release_request(fpm, req, what);
    assert_eq!(
        resp.body().trim(),
        want,
        "{what}'s answer (status {}, stderr {:?}, stdout {:?})\n{}",
        resp.app_status,
        resp.stderr,
        resp.stdout,
        fpm.ctx()()
    );
    resp
}

//! The command line, defined once with clap: parsing, `--help`, the shell
//! completions (`heaplive completions SHELL`) and the man page
//! (`heaplive man`) all come from these definitions. `heaplive run`'s
//! options check their values with the contract crate's grammars and take
//! their help from its settings table, so the command accepts exactly what
//! the library accepts.

use clap::{Args, Parser, Subcommand};
use heaplive_format::settings::{self, Setting};
use std::ffi::OsString;

const TEMPLATE: &str = "{usage-heading} {usage}\n\n{about-with-newline}\n{all-args}{after-help}";

#[derive(Parser, Debug)]
#[command(
    name = "heaplive",
    version,
    about = "heaplive: which call stacks hold the memory that is live right now?",
    after_help = "\
Examples:
  heaplive run -- ./server --port 8080     # dumps on SIGUSR2 and at exit
  heaplive dump 4242                       # prints heaplive.server.4242.1.folded
  heaplive dump --children $(cat /run/php/php8.2-fpm.pid)
  heaplive top heaplive.server.4242.1.folded
  heaplive diff heaplive.server.4242.1.folded heaplive.server.4242.2.folded
  heaplive flamegraph heaplive.server.4242.2.folded -o live.svg

Folded files are plain text, one stack a line: frames root first joined by
';', a space, the live bytes. flamegraph.pl, inferno and speedscope read them.",
    arg_required_else_help = true,
    help_template = TEMPLATE,
    disable_help_subcommand = false
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Run(RunArgs),
    Dump(DumpArgs),
    Start(SwitchArgs),
    Stop(SwitchArgs),
    Attach(AttachArgs),
    Detach(DetachArgs),
    Top(TopArgs),
    Diff(DiffArgs),
    Merge(MergeArgs),
    #[command(visible_alias = "flame")]
    Flamegraph(FlameArgs),
    Report(ReportArgs),
    Completions(CompletionsArgs),
    Man(ManArgs),
}

/// The help of a `run` option: the setting's doc and its name.
fn doc(s: &Setting) -> String {
    format!("{}; default {}  [{}]", s.doc, s.default, s.name())
}

/// A value parser that accepts what the library accepts for `s`.
fn setting_value(s: &'static Setting) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |v: &str| match s.grammar.check(v.as_bytes()) {
        Ok(()) => Ok(v.to_string()),
        Err(why) => Err(format!("{}='{v}' {why}", s.name())),
    }
}

fn interval(v: &str) -> Result<String, String> {
    setting_value(&settings::SAMPLE_INTERVAL)(v)
}
fn every(v: &str) -> Result<String, String> {
    let v = setting_value(&settings::DUMP_EVERY)(v)?;
    match heaplive_format::grammar::parse_duration_ms(v.as_bytes()) {
        Some(ms) if ms > 0 => Ok(v),
        _ => Err(format!(
            "wants a duration like 30, 30s, 500ms or 5m, not '{v}'"
        )),
    }
}
fn output(v: &str) -> Result<String, String> {
    setting_value(&settings::OUTPUT)(v)
}
/// A setting's value parser that also names the usual values, which the
/// shell completions offer (any value the grammar accepts is taken).
#[derive(Clone)]
pub struct WithValues {
    setting: &'static Setting,
    values: &'static [&'static str],
}

impl clap::builder::TypedValueParser for WithValues {
    type Value = String;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        v: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let v = v.to_str().unwrap_or("\u{fffd}");
        setting_value(self.setting)(v).map_err(|why| {
            let arg = arg.map_or(String::new(), |a| format!(" for '{a}'"));
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value '{v}'{arg}: {why}\n"),
            )
            .with_cmd(cmd)
        })
    }
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.values.iter().map(clap::builder::PossibleValue::new),
        ))
    }
}

fn signal() -> WithValues {
    WithValues {
        setting: &settings::SIGNAL,
        values: &[
            "USR2", "USR1", "RTMIN", "RTMIN+1", "RTMIN+2", "RTMIN+3", "none",
        ],
    }
}
fn format() -> WithValues {
    WithValues {
        setting: &settings::FORMAT,
        values: &["folded", "pprof", "folded,pprof"],
    }
}

/// The settings `run` and `attach` take as options, each the value of a
/// `HEAPLIVE_*` variable, checked with the library's grammar.
#[derive(Args, Debug)]
pub struct SettingArgs {
    #[arg(long, value_name = "BYTES", value_parser = interval,
          help = doc(&settings::SAMPLE_INTERVAL))]
    pub interval: Option<String>,
    #[arg(long, value_name = "SECS", value_parser = every, help = doc(&settings::DUMP_EVERY))]
    pub every: Option<String>,
    #[arg(short, long, value_name = "TEMPLATE", value_parser = output, help = doc(&settings::OUTPUT))]
    pub output: Option<String>,
    #[arg(long, value_name = "SIG", value_parser = signal(), hide_possible_values = true,
          help = doc(&settings::SIGNAL))]
    pub signal: Option<String>,
    #[arg(long, value_name = "F", value_parser = format(), hide_possible_values = true,
          help = doc(&settings::FORMAT))]
    pub format: Option<String>,
}

impl SettingArgs {
    /// The settings given, with their values, in the order of the options.
    pub fn given(&self) -> Vec<(&'static settings::Setting, &str)> {
        [
            (&settings::SAMPLE_INTERVAL, &self.interval),
            (&settings::DUMP_EVERY, &self.every),
            (&settings::OUTPUT, &self.output),
            (&settings::SIGNAL, &self.signal),
            (&settings::FORMAT, &self.format),
        ]
        .into_iter()
        .filter_map(|(s, v)| Some((s, v.as_deref()?)))
        .collect()
    }
}

#[derive(Args, Debug)]
#[command(
    about = "run a program under the profiler (LD_PRELOAD=libheaplive.so)",
    long_about = "Runs COMMAND with LD_PRELOAD=libheaplive.so (prepended to any LD_PRELOAD
already set), exits with its status (128+N if a signal N killed it), and lists
the files written, by process. Children of COMMAND are profiled too, each into
its own files, and listed wherever they wrote them (after a cd, an exec, a fork
of a fork): each library reports its files to run (HEAPLIVE_RUN_REPORT), so no
other process's files are listed. Dump on demand with 'heaplive dump PID' (or kill -USR2 PID).

Each option sets the variable in brackets; unset ones keep the library's
defaults, or the value already in the environment.",
    override_usage = "heaplive run [OPTIONS] -- COMMAND [ARGS...]",
    after_help = "\
The library is $HEAPLIVE_LIB if set, else libheaplive.so next to the heaplive
executable, else ../lib/libheaplive.so relative to it (make install), else
../lib/heaplive/libheaplive.so.

Examples:
  heaplive run -- ./server --port 8080
  heaplive run --interval 1M --every 5m -- php-fpm8.2 -F
  heaplive run --output '/var/tmp/%e.%p.%n.folded' --signal RTMIN+3 -- ./daemon",
    help_template = TEMPLATE
)]
pub struct RunArgs {
    #[command(flatten)]
    pub settings: SettingArgs,
    /// no messages from heaplive: neither the command's nor the library's
    /// (dump summaries, leak warnings; HEAPLIVE_LOG=/dev/null unless
    /// HEAPLIVE_LOG is set); warnings about bad HEAPLIVE_* values remain
    #[arg(short, long)]
    pub quiet: bool,
    /// when the program ends, write the report page of its dumps to FILE
    /// (what 'heaplive report' makes of them)
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// the program to run and its arguments
    #[arg(value_name = "COMMAND", required = true, num_args = 1..,
          trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

fn pid(v: &str) -> Result<i32, String> {
    match v.parse::<i32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("'{v}' is not a process id")),
    }
}

fn timeout(v: &str) -> Result<f64, String> {
    match heaplive_format::grammar::parse_seconds(v.as_bytes()) {
        Some(t) if t > 0.0 => Ok(t),
        _ => Err(format!("--timeout wants seconds like 10 or 2.5, not '{v}'")),
    }
}

#[derive(Args, Debug)]
#[command(
    about = "ask running processes for a dump now, print the file names",
    long_about = "Asks each process (started under heaplive or LD_PRELOAD=libheaplive.so) for
a dump now: sends its dump signal (USR2 unless HEAPLIVE_SIGNAL chose another),
waits until the dump is written, and prints the file's path.",
    override_usage = "heaplive dump PID... [--children] [--timeout SECS]",
    after_help = "\
Examples:
  heaplive dump 4242
  heaplive dump --children $(cat /run/php/php8.2-fpm.pid)
  heaplive top $(heaplive dump --children 4242)",
    help_template = TEMPLATE
)]
pub struct DumpArgs {
    /// PID is a parent (a php-fpm master): dump each of its direct children instead
    #[arg(long)]
    pub children: bool,
    /// how long to wait for each dump
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = timeout)]
    pub timeout: f64,
    #[arg(value_name = "PID", required = true, num_args = 1.., value_parser = pid)]
    pub pids: Vec<i32>,
}

#[derive(Args, Debug)]
#[command(
    about = "start or stop sampling in running processes",
    long_about = "'heaplive start PID' makes a process whose library was loaded dormant
(HEAPLIVE_START=0) or stopped begin sampling; 'heaplive stop PID' stops it.
Stopping keeps the samples already taken: they leave as their blocks are
freed, so a later dump still shows what was allocated while sampling and is
still live; frees of blocks allocated while stopped change nothing.

The command is the process's dump signal sent with sigqueue(2) and a value
the library recognises (it does not dump then, nor pass the signal on); the
library logs 'sampling started' or 'sampling stopped'. From inside the
program: heaplive_start() and heaplive_stop() (src/heaplive.h).",
    after_help = "\
Examples:
  HEAPLIVE_START=0 LD_PRELOAD=libheaplive.so ./server &
  heaplive start $!; sleep 60; heaplive dump $!; heaplive stop $!",
    help_template = TEMPLATE
)]
pub struct SwitchArgs {
    #[arg(value_name = "PID", required = true, num_args = 1.., value_parser = pid)]
    pub pids: Vec<i32>,
}

#[derive(Args, Debug)]
#[command(
    about = "load the profiler into a running process (ptrace), without restarting it",
    long_about = "Loads libheaplive.so into process PID, which was started without it: one
thread is stopped for a moment and made to call dlopen, then the library
redirects the allocation functions of every loaded module (and of modules
loaded later) to itself. Allocations made before the attach are not seen.
Dumps then work as under 'heaplive run': 'heaplive dump PID', the signal,
--every, and a dump at exit. Needs the right to ptrace PID (same user and
kernel.yama.ptrace_scope=0, or root). See README, \"Attaching to a running
process\".",
    override_usage = "heaplive attach [OPTIONS] PID",
    after_help = "\
Examples:
  heaplive attach --interval 1M --every 5m 4242
  heaplive attach --children $(cat /run/php/php8.2-fpm.pid)
  heaplive detach 4242",
    help_template = TEMPLATE
)]
pub struct AttachArgs {
    #[command(flatten)]
    pub settings: SettingArgs,
    /// PID is a parent (a php-fpm master): attach to each of its children instead
    #[arg(long)]
    pub children: bool,
    #[arg(value_name = "PID", value_parser = pid)]
    pub pid: i32,
}

#[derive(Args, Debug)]
#[command(
    about = "undo 'heaplive attach': restore the allocation functions, stop sampling",
    long_about = "Puts back every allocation slot 'heaplive attach' redirected in PID and stops
sampling and dumps. The library stays loaded but inert: a thread may still be
inside one of its functions, so unloading it could crash the process.",
    override_usage = "heaplive detach PID",
    help_template = TEMPLATE
)]
pub struct DetachArgs {
    #[arg(value_name = "PID", value_parser = pid)]
    pub pid: i32,
}

/// Options shared by the table reports.
#[derive(Args, Debug)]
pub struct TableArgs {
    /// show N rows (0 = all)
    #[arg(short = 'n', long = "rows", value_name = "N", default_value_t = 20)]
    pub rows: usize,
    /// exact byte counts instead of KiB/MiB/GiB
    #[arg(long)]
    pub bytes: bool,
    /// shorten stacks to W columns (default: the terminal's width, or 160
    /// when not a terminal; 0 = never shorten)
    #[arg(short = 'w', long, value_name = "W")]
    pub width: Option<usize>,
}

#[derive(Args, Debug)]
#[command(
    about = "the stacks (or functions) holding the most live bytes",
    long_about = "The stacks holding the most live bytes. Several files are summed (e.g. the
dumps of all php-fpm workers taken at one moment). '-' reads standard input;
a directory stands for the dumps in it (its *.folded files, less the
.alloc, .samples, .peak and .variance views).

Stacks are shown leaf first: 'xmlStrdup <- xmlNewNode <- main'.

Error bars: in sampled mode every dump has a samples file NAME.samples.folded
beside NAME.folded: per view (NAME.folded, NAME.alloc.folded,
NAME.peak.folded) and stack, the number of live samples and the estimated
variance of the stack's bytes, from its samples' weights (older dumps: a
NAME.samples.folded of counts, and with HEAPLIVE_VIEWS=...,variance the
variance files NAME.variance.folded, NAME.alloc.variance.folded,
NAME.peak.variance.folded). For any of these views top then shows per stack the number of samples and the 95%
interval of the estimate (exact Poisson-based for few samples; zero width
for blocks sampled with certainty, 37 times the sample interval and more),
the total's interval, and as its last line a bound on what stacks with no
sample can hold. Several files: the variances add. Exact mode has no error
bars.

Temporary allocations: with HEAPLIVE_VIEWS=...,temporary every dump has
NAME.temporary.folded, per stack the bytes of temporary allocations (freed
before their thread's next allocation, as heaptrack counts them); 'heaplive
top NAME.temporary.folded' (or 'heaplive top --view temporary NAME.folded',
or a directory) ranks them (column TEMPORARY;
95% intervals from NAME.temporary.variance.folded with ...,variance).

Application frames: with HEAPLIVE_VIEWS=...,app every dump has NAME.app.txt,
the names of the main executable's frames; 'heaplive top --app NAME.folded'
groups the live bytes by the innermost frame of each stack that is in the
executable (not in a shared library), the way --php names PHP's application
frame.",
    override_usage = "heaplive top FILE|DIR... [-n N] [--view VIEW] [--inclusive [--by-line]] [--php] [--app] [--endpoints] [--bytes] [--width W]
       heaplive top --pool MASTER_PID|DIR [--bytes]",
    after_help = "\
Examples:
  heaplive top heaplive.php-fpm8.2.4242.1.folded
  heaplive top -n 50 --inclusive heaplive.php-fpm8.2.*.3.folded
  heaplive top --view temporary heaplive.app.4242.1.folded
  heaplive top --endpoints /var/tmp/heaplive-peaks/
  heaplive dump --children 4242 && heaplive top --pool 4242",
    help_template = TEMPLATE
)]
pub struct TopArgs {
    /// per function instead of per stack: the bytes of every stack that
    /// contains the function (each stack counted once), with its exclusive
    /// (leaf) bytes beside it
    #[arg(long)]
    pub inclusive: bool,
    /// with --inclusive: a row per function and line (`f (a.php:12)`,
    /// `f (a.php:30)`) instead of one per function (`f (a.php)`)
    #[arg(long, requires = "inclusive")]
    pub by_line: bool,
    /// PHP frames only (dumps of php-fpm and php-cli): native frames are
    /// folded away, so stacks read 'Repo::load (Repo.php:41) <- {main}
    /// (index.php:12)'; ZendMM memory keeps its [zend_mm] leaf, and stacks
    /// with no PHP frame become '[no PHP code]'
    #[arg(long)]
    pub php: bool,
    /// per application frame instead of per stack: the bytes of each stack
    /// under its innermost frame in the main executable (not in a shared
    /// library), from the dump's NAME.app.txt (HEAPLIVE_VIEWS=...,app);
    /// stacks with no frame of the executable make one row
    #[arg(long, conflicts_with_all = ["inclusive", "php"])]
    pub app: bool,
    /// PHP endpoints instead of stacks: per request root frame ([GET
    /// /api/report]), the highest and mean bytes over the dumps it is in;
    /// on a directory of per-request peak dumps (HEAPLIVE_PHP_PEAK_BYTES),
    /// the endpoints by peak
    #[arg(long, conflicts_with_all = ["inclusive", "php", "app"])]
    pub endpoints: bool,
    /// a pool's workers instead of stacks: the children of MASTER_PID (each
    /// one's newest dump, from its status file) or a directory's dumps (the
    /// newest per pid, NAME.PID.N.folded), one row each and their sum:
    /// live bytes and the resident memory by kind of NAME.maps.txt
    /// (ZendMM, malloc, opcache, stacks, files)
    #[arg(long, value_name = "MASTER_PID|DIR", conflicts_with_all = ["inclusive", "php", "app", "endpoints", "files", "view"])]
    pub pool: Option<String>,
    /// the view of each dump to rank, whichever of its files is named (or
    /// the dumps of a directory): live (NAME.folded), alloc
    /// (NAME.alloc.folded), peak (NAME.peak.folded), temporary
    /// (NAME.temporary.folded: bytes of blocks freed before their thread's
    /// next allocation, HEAPLIVE_VIEWS=...,temporary)
    #[arg(long, value_name = "VIEW", value_parser = ["live", "alloc", "peak", "temporary"], conflicts_with = "endpoints")]
    pub view: Option<String>,
    #[command(flatten)]
    pub table: TableArgs,
    #[arg(value_name = "FILE", required_unless_present = "pool", num_args = 1..)]
    pub files: Vec<String>,
}

#[derive(Args, Debug)]
#[command(
    about = "what grew and what shrank between two dumps",
    long_about = "What grew and what shrank from OLD to NEW: per stack, then per function
(exclusive: the bytes whose leaf frame is that function), sorted by the size
of the change. To compare groups of files, merge each group first with
'heaplive merge'.",
    override_usage = "heaplive diff OLD NEW [-n N] [--bytes] [--width W]
       heaplive diff OLD NEW --folded > diff.folded",
    after_help = "\
Examples:
  heaplive diff heaplive.app.4242.1.folded heaplive.app.4242.5.folded
  heaplive diff --folded a.folded b.folded > change.folded
  heaplive flamegraph change.folded -o change.svg    # red grew, blue shrank",
    help_template = TEMPLATE
)]
pub struct DiffArgs {
    /// write 'stack OLDCOUNT NEWCOUNT' lines instead, the two-count format
    /// that 'heaplive flamegraph' renders as a differential flame graph
    #[arg(long)]
    pub folded: bool,
    #[command(flatten)]
    pub table: TableArgs,
    #[arg(value_name = "OLD")]
    pub old: String,
    #[arg(value_name = "NEW")]
    pub new: String,
}

#[derive(Args, Debug)]
#[command(
    about = "sum several folded files into one (to stdout)",
    long_about = "Sums identical stacks of several folded files and writes one folded file,
sorted by stack, to standard output. '-' reads standard input; a directory
stands for the dumps in it (its *.folded files, less the .alloc, .samples,
.peak and .variance views).

Error bars: with --samples, merge writes the samples file of the sum
instead (NAME.samples.folded, version 2: per stack the samples and the
estimated variances of every file added up, read from the samples file
beside each NAME.folded): variances of independent samples add, so with
'heaplive merge A B > all.folded' and 'heaplive merge --samples A B >
all.samples.folded', 'heaplive top all.folded' shows the 95% intervals of
the sum. --variance writes the summed variances alone as a folded file.",
    override_usage = "heaplive merge [--samples|--variance] FILE|DIR... > all.folded",
    after_help = "\
Example:
  heaplive merge heaplive.php-fpm8.2.*.2.folded > pool.folded
  heaplive merge --samples heaplive.php-fpm8.2.*.2.folded > pool.samples.folded",
    help_template = TEMPLATE
)]
pub struct MergeArgs {
    /// write the summed variances per stack (from each NAME.folded's
    /// samples file) as a folded file
    #[arg(long, conflicts_with = "samples")]
    pub variance: bool,
    /// write the samples file of the sum (version 2: samples and
    /// variances per stack, added up), for the intervals of the sum
    #[arg(long)]
    pub samples: bool,
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<String>,
}

#[derive(Args, Debug)]
#[command(
    about = "render folded files as an interactive SVG flame graph",
    long_about = "Renders folded files (summed when several) as an interactive SVG flame graph
of live bytes: the width of a box is the live memory allocated under that
call. Click to zoom, Ctrl-F to search. Writes to standard output without -o.
The title and the counts' name follow the file's view: \"Live heap\"
(NAME.folded), \"Allocated bytes\" (NAME.alloc.folded), \"Live heap at the
peak\" (NAME.peak.folded).

A file of 'heaplive diff --folded' (stack OLD NEW on every line) becomes a
differential flame graph: boxes as wide as the new bytes, red where a stack
grew, blue where it shrank.",
    override_usage = "heaplive flamegraph FILE... [-o OUT.svg] [--title TITLE] [--php]",
    after_help = "\
Examples:
  heaplive flamegraph heaplive.php-fpm8.2.4242.3.folded -o live.svg
  heaplive flamegraph heaplive.php-fpm8.2.*.3.folded > pool.svg
  heaplive flamegraph --php heaplive.php-fpm8.2.4242.3.folded -o php.svg
  heaplive diff --folded OLD.folded NEW.folded > change.folded
  heaplive flamegraph change.folded -o change.svg",
    help_template = TEMPLATE
)]
pub struct FlameArgs {
    /// write the SVG to FILE
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
    /// title (default: the process and time of the dump, taken from the file
    /// name heaplive.<exe>.<pid>.<n>.folded and the file's modification time)
    #[arg(long, value_name = "TITLE")]
    pub title: Option<String>,
    /// PHP frames only (dumps of php-fpm and php-cli), as `top --php`:
    /// native frames are folded away, so the graph reads '{main}
    /// (index.php:12)' above 'Repo::load (Repo.php:41)'; ZendMM memory keeps
    /// its [zend_mm] leaf, and stacks with no PHP frame go under '[no PHP
    /// code]'
    #[arg(long)]
    pub php: bool,
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<String>,
}

#[derive(Args, Debug)]
#[command(
    about = "one HTML page of a run: memory over time, top stacks, flame graphs, what grew",
    long_about = "Writes one self-contained HTML page (no network, no external file: it opens \
from a file:// URL in any current browser) from dumps and their companion files \
(NAME.timeline.tsv, NAME.samples.folded, NAME.alloc.folded, NAME.peak.folded): per \
process, memory over time, the chosen dump's top stacks and flame graph by view, the \
difference between two dumps, the stacks that grew at every dump, PHP endpoints. The \
data is embedded as JSON in <script type=\"application/json\" id=\"heaplive-data\"> \
(its shape: README, \"heaplive report\").",
    override_usage = "heaplive report [FILE|DIR]... [-o report.html]",
    after_help = "\
Examples:
  heaplive report . -o report.html          # every dump in this directory
  heaplive report heaplive.server.4242.*.folded -o server.html",
    help_template = TEMPLATE
)]
pub struct ReportArgs {
    /// write the page to FILE (default: standard output)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
    /// the page's title (default: the programs, processes and dumps)
    #[arg(long, value_name = "TITLE")]
    pub title: Option<String>,
    /// dumps (NAME.folded), or directories of dumps (default: .)
    #[arg(value_name = "FILE|DIR")]
    pub files: Vec<String>,
}

#[derive(Args, Debug)]
#[command(
    about = "print a shell completion script (bash, zsh, fish, elvish, powershell)",
    long_about = "Prints a completion script for SHELL to standard output.",
    override_usage = "heaplive completions SHELL",
    after_help = "\
Examples:
  heaplive completions bash > /etc/bash_completion.d/heaplive
  heaplive completions zsh > \"${fpath[1]}/_heaplive\"
  heaplive completions fish > ~/.config/fish/completions/heaplive.fish",
    help_template = TEMPLATE
)]
pub struct CompletionsArgs {
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
#[command(
    about = "print the man page heaplive(1)",
    long_about = "Prints the man page heaplive(1), in roff, to standard output.",
    override_usage = "heaplive man",
    after_help = "\
Examples:
  heaplive man | man -l -
  heaplive man > /usr/local/share/man/man1/heaplive.1",
    help_template = TEMPLATE
)]
pub struct ManArgs {}

/// The subcommands whose operands are process ids: dump, start, stop and
/// detach take processes running heaplive; attach takes any.
const PID_SUBCOMMANDS: &str = "dump start stop detach attach";

/// Process ids for the completions, which clap cannot express: `script`
/// (clap_complete's) with the pid operands of [`PID_SUBCOMMANDS`]
/// completed from /proc (those with libheaplive mapped, any for attach).
pub fn with_pid_completion(shell: clap_complete::Shell, script: Vec<u8>) -> Vec<u8> {
    use clap_complete::Shell;
    let mut text = String::from_utf8_lossy(&script).into_owned();
    match shell {
        Shell::Bash => {
            text += &BASH_PIDS.replace("@SUBS@", &PID_SUBCOMMANDS.replace(' ', "|"));
        }
        Shell::Zsh => {
            text = text
                .replace("'*::pids:_default'", "'*::pids:_heaplive_pids'")
                .replace("':pid:_default'", "':pid:_heaplive_pids'");
            text += ZSH_PIDS;
        }
        Shell::Fish => {
            text += &FISH_PIDS.replace("@SUBS@", PID_SUBCOMMANDS);
        }
        _ => {}
    }
    text.into_bytes()
}

const BASH_PIDS: &str = r#"
# Process ids for dump, start, stop, detach (processes running heaplive)
# and attach (any).
_heaplive_pids() {
    local m p
    if [[ $1 == attach ]]; then
        (cd /proc && printf '%s\n' [0-9]*)
        return
    fi
    for m in /proc/[0-9]*/maps; do
        if grep -qs libheaplive "$m"; then
            p=${m#/proc/}
            printf '%s\n' "${p%/maps}"
        fi
    done
}
_heaplive_with_pids() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    case "${COMP_WORDS[1]}" in
        @SUBS@)
            if [[ ${COMP_CWORD} -ge 2 && ${cur} != -* ]]; then
                case "${prev}" in
                    --timeout|--interval|--every|--output|-o|--signal|--format) ;;
                    *)
                        COMPREPLY=($(compgen -W "$(_heaplive_pids "${COMP_WORDS[1]}")" -- "${cur}"))
                        return 0
                        ;;
                esac
            fi
            ;;
    esac
    _heaplive "$@"
}
complete -F _heaplive_with_pids -o nosort -o bashdefault -o default heaplive
"#;

const ZSH_PIDS: &str = r#"
# Process ids for dump, start, stop, detach (processes running heaplive)
# and attach (any).
_heaplive_pids() {
    local -a pids
    local m
    if [[ ${words[1]} == attach || ${words[2]} == attach ]]; then
        pids=(/proc/<->(N:t))
    else
        for m in /proc/<->/maps(N); do
            grep -qs libheaplive $m && pids+=(${${m#/proc/}%/maps})
        done
    fi
    _describe 'process id' pids
}
"#;

const FISH_PIDS: &str = r#"
# Process ids for dump, start, stop, detach (processes running heaplive)
# and attach (any).
function __heaplive_pids
    if __fish_seen_subcommand_from attach
        __fish_complete_pids
        return
    end
    for m in /proc/[0-9]*/maps
        if grep -qs libheaplive $m
            string replace -r '^/proc/(\d+)/maps$' '$1' $m
        end
    end
end
complete -c heaplive -n "__fish_seen_subcommand_from @SUBS@" -f -a "(__heaplive_pids)"
"#;

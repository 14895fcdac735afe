<?php
// Debian's nikic/php-parser (package php-parser) parsing and pretty-printing
// the first N .php files of its own tree, /usr/share/php/PhpParser (sorted
// by path), ROUNDS times: real code nobody here wrote (issue 26). Its own
// files, so that the workload is the package's and not whatever else is
// installed under /usr/share/php (until 2026-12-02 it took the first files
// of all of /usr/share/php: PEAR's, when the test dependencies had pulled
// PEAR in, and a run became 5.5 times longer).
// Usage: php php_parser.php [N [ROUNDS]]
require '/usr/share/php/PhpParser/autoload.php';
$n = (int)($argv[1] ?? 40);
$rounds = (int)($argv[2] ?? 2);
$it = new RecursiveIteratorIterator(new RecursiveDirectoryIterator('/usr/share/php/PhpParser', FilesystemIterator::SKIP_DOTS));
$files = [];
foreach ($it as $f) { if (substr($f->getPathname(), -4) === '.php') $files[] = $f->getPathname(); }
sort($files);
$files = array_slice($files, 0, $n);
$parser = (new PhpParser\ParserFactory)->create(PhpParser\ParserFactory::PREFER_PHP7);
$printer = new PhpParser\PrettyPrinter\Standard;
$bytes = 0; $nodes = 0;
for ($r = 0; $r < $rounds; $r++) {
    foreach ($files as $file) {
        $ast = $parser->parse(file_get_contents($file));
        $bytes += strlen($printer->prettyPrintFile($ast));
        $nodes += count($ast);
    }
}
printf("files=%d printed=%d top-level=%d usage=%d peak=%d\n", count($files), $bytes, $nodes, memory_get_usage(), memory_get_peak_usage());

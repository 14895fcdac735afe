<?php
// php-fpm endpoints for bench/php.sh: real code nobody here wrote (Debian's
// php-parser and php-twig). /parse?i=K parses and pretty-prints 4 files of
// /usr/share/php (the K-th group of 4 of the first 40, by path); /twig
// renders a Twig template over 300 rows. Prints memory_get_usage() and
// memory_get_peak_usage() last.
$uri = $_SERVER['REQUEST_URI'] ?? '/parse';
$path = parse_url($uri, PHP_URL_PATH);
if ($path === '/twig') {
    require_once '/usr/share/php/Twig/autoload.php';
    $tpl = '<table>{% for r in rows %}<tr class="{{ cycle(["odd","even"], loop.index0) }}"><td>{{ r.id }}</td><td>{{ r.name|title }}</td>'
         . '<td>{{ r.tags|join(", ") }}</td><td>{{ r.score|number_format(2) }}</td></tr>{% endfor %}</table>';
    $twig = new \Twig\Environment(new \Twig\Loader\ArrayLoader(['t' => $tpl]));
    $rows = [];
    for ($i = 0; $i < 300; $i++) {
        $rows[] = ['id' => $i, 'name' => "item number $i", 'tags' => ['a' . ($i % 7), 'b' . ($i % 11)], 'score' => $i * 1.5];
    }
    $out = $twig->render('t', ['rows' => $rows]);
} else {
    require_once '/usr/share/php/PhpParser/autoload.php';
    $it = new RecursiveIteratorIterator(new RecursiveDirectoryIterator('/usr/share/php', FilesystemIterator::SKIP_DOTS));
    $files = [];
    foreach ($it as $f) { if (substr($f->getPathname(), -4) === '.php') $files[] = $f->getPathname(); }
    sort($files);
    $k = ((int)($_GET['i'] ?? 0)) % 10;
    $parser = (new PhpParser\ParserFactory)->create(PhpParser\ParserFactory::PREFER_PHP7);
    $printer = new PhpParser\PrettyPrinter\Standard;
    $out = '';
    foreach (array_slice($files, 4 * $k, 4) as $file) {
        $out .= $printer->prettyPrintFile($parser->parse(file_get_contents($file)));
    }
}
echo strlen($out), ' ', md5($out), ' usage=', memory_get_usage(), ' peak=', memory_get_peak_usage(), "\n";

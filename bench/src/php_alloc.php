<?php
// A CPU benchmark with PHP's usual allocation mix: strings, arrays, objects.
class Node { public $k; public $v; public $next; function __construct($k, $v) { $this->k = $k; $this->v = $v; } }
function work($n) {
    $total = 0;
    for ($r = 0; $r < $n; $r++) {
        $a = [];
        for ($i = 0; $i < 2000; $i++) { $a["k$i"] = str_repeat('x', $i % 64) . $i; }
        $s = implode(',', array_slice($a, 0, 500));
        $parts = explode(',', $s);
        $objs = [];
        foreach ($parts as $i => $p) { $objs[] = new Node($i, strtoupper($p)); }
        usort($objs, fn($x, $y) => strcmp($y->v, $x->v));
        $total += count($objs) + strlen($s);
        $m = [];
        for ($i = 0; $i < 3000; $i++) { $m[$i % 97][] = $i * 2; }
        $total += array_sum(array_map('count', $m));
        $j = json_encode($a); $d = json_decode($j, true); $total += count($d);
    }
    return $total;
}
$t = microtime(true);
echo work((int)($argv[1] ?? 200)), "\n";
fwrite(STDERR, sprintf("%.3f\n", microtime(true) - $t));

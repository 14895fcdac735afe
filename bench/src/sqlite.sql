-- sqlite3 :memory: < sqlite.sql   (the "sqlite3" real-program workload)
PRAGMA cache_size = -65536;
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 260000)
INSERT INTO t SELECT x, x % 997, 'name-' || (x * 7919 % 100003), printf('%.*c', 20 + x % 200, 'p') FROM c;
CREATE INDEX t_grp ON t(grp);
CREATE INDEX t_name ON t(name);
SELECT grp, count(*), sum(length(payload)), max(name) FROM t GROUP BY grp ORDER BY 2 DESC LIMIT 3;
SELECT count(DISTINCT name) FROM t;
SELECT a.grp, count(*) FROM t a JOIN t b ON a.id = b.id + 1 WHERE a.grp < 50 GROUP BY a.grp ORDER BY a.grp LIMIT 3;
UPDATE t SET payload = upper(payload) || name WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT group_concat(name, ',') IS NOT NULL FROM (SELECT name FROM t ORDER BY name DESC LIMIT 20000);
SELECT json_group_array(json_object('id', id, 'n', name)) IS NOT NULL FROM t WHERE grp < 300;

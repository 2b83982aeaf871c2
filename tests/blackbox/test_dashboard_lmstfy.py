"""Black-box tests of the dashboard's lmstfy view on the HTTP side (docs/DASHBOARD.md,
section 10): GET /dashboard/api/namespaces (the tube list grouped by namespace, with
each namespace's totals, paged and bounded), the `prefix` parameter of the tube list (an
open namespace's queues), POST .../delete-dead (a queue's dead letters deleted from the
head), their checks and the admin account they need; counts checked
against what the text protocol sees.

Run: python3 -m unittest -v tests/blackbox/test_dashboard_lmstfy.py   (binary: $STALKD_BIN)
"""
import base64
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from test_dashboard_api import API, AccountCase, DashboardCase  # noqa: E402


def names(answer):
    return [r["namespace"] if r["kind"] == "namespace" else "tube:" + r["tube"]["name"]
            for r in answer["rows"]]


class NamespacesTest(DashboardCase):
    def setUp(self):
        super().setUp()
        c = self.c = self.text()
        # shop: 3 queues; mail: 1; "plain", "a/_x" (not lmstfy's: a queue may not start
        # with "_") and "default" are plain tubes.
        self.put(c, "shop/orders", "o1", pri=245)
        self.put(c, "shop/orders", "o2", delay=600)
        self.put(c, "shop/refunds", "r1")
        self.bury(c, "shop/refunds", 2)
        self.put(c, "shop/z", "z1")
        self.put(c, "mail/out", "m1")
        self.put(c, "plain", "p1")
        self.put(c, "a/_x", "x1")
        self.paused = self.text()
        self.assertEqual(self.paused.cmd("pause-tube shop/z 600"), b"PAUSED\r\n")

    def groups(self, **params):
        params.setdefault("step", 0)
        return self.djson("GET", "namespaces", params)

    def test_grouped_by_name_with_totals(self):
        g = self.groups()
        self.assertEqual(names(g), ["tube:a/_x", "tube:default", "mail", "tube:plain", "shop"])
        self.assertEqual((g["total_tubes"], g["matched"], g["more"], g["order"]),
                         (7, 7, False, "asc"))
        shop = g["rows"][-1]
        want = {"queues": 3, "paused": 1}
        for k in ("ready", "urgent", "reserved", "delayed", "buried", "waiting", "total_jobs",
                  "deletes", "pauses", "expired", "tries_exhausted"):
            want[k] = 0
        # The totals are the sums of the queues' stats-tube.
        for t in ("shop/orders", "shop/refunds", "shop/z"):
            st = self.tube_stats(self.c, t)
            for k, key in (("ready", "current-jobs-ready"), ("urgent", "current-jobs-urgent"),
                           ("delayed", "current-jobs-delayed"), ("buried", "current-jobs-buried"),
                           ("total_jobs", "total-jobs"), ("pauses", "cmd-pause-tube")):
                want[k] += st[key]
        self.assertEqual({k: shop[k] for k in want}, want)
        self.assertEqual((shop["ready"], shop["delayed"], shop["buried"], shop["urgent"]),
                         (3, 1, 2, 3))
        # A plain tube's row is the tube list's row.
        plain = g["rows"][3]["tube"]
        self.assertEqual((plain["name"], plain["ready"]), ("plain", 1))
        self.assertEqual(plain, self.djson("GET", "tubes", {"q": "plain", "step": 0})["tubes"][0])

    def test_search_order_and_paging(self):
        g = self.groups(q="SHOP/")
        self.assertEqual((names(g), g["matched"]), (["shop"], 3))
        self.assertEqual(g["rows"][0]["queues"], 3)
        # A search counts only the queues it matches.
        g = self.groups(q="refund")
        self.assertEqual((names(g), g["rows"][0]["queues"], g["rows"][0]["ready"]),
                         (["shop"], 1, 1))
        self.assertEqual(names(self.groups(order="desc")),
                         ["shop", "tube:plain", "mail", "tube:default", "tube:a/_x"])
        g = self.groups(limit=2, offset=1)
        self.assertEqual((names(g), g["more"]), (["tube:default", "mail"], True))
        g = self.groups(order="desc", limit=2, offset=1)
        self.assertEqual((names(g), g["more"]), (["tube:plain", "mail"], True))
        g = self.groups(limit=2, offset=3)
        self.assertEqual((names(g), g["more"]), (["tube:plain", "shop"], False))
        self.assertEqual(self.groups(offset=5)["rows"], [])
        self.assertEqual(self.groups(q="nothing")["rows"], [])

    def test_a_namespace_and_a_tube_of_one_name(self):
        self.put(self.c, "mail", "a plain tube named as a namespace")
        g = self.groups(q="mail")
        self.assertEqual(names(g), ["mail", "tube:mail"])

    def test_prefix_lists_a_namespaces_queues(self):
        t = self.djson("GET", "tubes", {"prefix": "shop/", "step": 0})
        self.assertEqual([r["name"] for r in t["tubes"]], ["shop/orders", "shop/refunds", "shop/z"])
        self.assertEqual(t["matched"], 3)
        t = self.djson("GET", "tubes", {"prefix": "shop/", "sort": "buried", "limit": 1, "step": 0})
        self.assertEqual([r["name"] for r in t["tubes"]], ["shop/refunds"])
        t = self.djson("GET", "tubes", {"prefix": "shop/", "q": "Z", "step": 0})
        self.assertEqual([r["name"] for r in t["tubes"]], ["shop/z"])
        # A prefix is not a substring.
        self.assertEqual(self.djson("GET", "tubes", {"prefix": "hop/"})["tubes"], [])

    def test_prefix_of_the_tree(self):
        g = self.groups(prefix="shop/")
        self.assertEqual((names(g), g["matched"], g["rows"][0]["queues"]), (["shop"], 3, 3))
        self.assertEqual(names(self.groups(prefix="pl")), ["tube:plain"])

    def test_its_scripts_are_served(self):
        for name in ("lmstfy.js", "tokens.js"):
            r = self.adm("GET", "/dashboard/" + name)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("content-type"), "text/javascript; charset=utf-8")
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "web",
                                "dashboard", name)
            with open(path, "rb") as f:
                self.assertEqual(r.body, f.read(), name)

    def test_bad_parameters(self):
        for params, err in (({"order": "up"}, "invalid order"), ({"limit": 0}, "invalid limit"),
                            ({"limit": 201}, "invalid limit"), ({"offset": -1}, "invalid offset"),
                            ({"offset": 1000001}, "invalid offset"), ({"step": 61}, "invalid step"),
                            ({"step": "x"}, "invalid step")):
            self.assertError(self.dash("GET", "namespaces", params), 400, err)
        self.assertError(self.dash("GET", "tubes", {"prefix": "p" * 201}), 400, "invalid prefix")
        for method in ("POST", "DELETE"):
            self.assertError(self.dash(method, "namespaces"), 404, "api not found")
        self.assertError(self.dash("GET", "namespaces/shop"), 404, "api not found")


class DeleteDeadLettersTest(DashboardCase):
    def test_from_the_head(self):
        c = self.text()
        ids = self.bury(c, "shop/orders", 5)
        self.put(c, "shop/orders", "ready")
        r = self.djson("POST", "tubes/shop%2Forders/delete-dead", {"count": 2})
        self.assertEqual(r, {"deleted": 2})
        for jid in ids[:2]:
            self.assertEqual(c.cmd("peek %d" % jid), b"NOT_FOUND\r\n")
        st = self.tube_stats(c, "shop/orders")
        self.assertEqual((st["current-jobs-buried"], st["current-jobs-ready"]), (3, 1))
        self.assertEqual(self.djson("POST", "tubes/shop%2Forders/delete-dead"), {"deleted": 1})
        self.assertEqual(self.djson("POST", "tubes/shop%2Forders/delete-dead", {"count": 99}),
                         {"deleted": 2})
        self.assertEqual(self.djson("POST", "tubes/shop%2Forders/delete-dead"), {"deleted": 0})
        self.assertEqual(self.tube_stats(c, "shop/orders")["current-jobs-ready"], 1)
        # The dashboard's session uses "default" again: it keeps no tube alive.
        self.assertEqual(self.tube_stats(c, "default")["current-using"], 2)

    def test_in_slices(self):
        c = self.text()
        self.bury(c, "q", 2500)
        self.assertEqual(self.djson("POST", "tubes/q/delete-dead", {"count": 3000}),
                         {"deleted": 2500})
        self.assertEqual(self.tube_stats(c, "q")["current-jobs-buried"], 0)

    def test_refusals(self):
        self.assertError(self.dash("POST", "tubes/nope/delete-dead"), 404, "tube not found")
        self.assertError(self.dash("POST", "tubes/-bad/delete-dead"), 400, "invalid tube name")
        for count in (0, -1, "x", "", 2 ** 64):
            self.assertError(self.dash("POST", "tubes/default/delete-dead", {"count": count}),
                             400, "invalid count")
        self.assertError(self.dash("POST", "tubes/default/delete-dead", headers=[]), 403,
                         "missing X-Requested-With header")
        self.assertError(self.dash("GET", "tubes/default/delete-dead"), 404, "api not found")


class NamespacesAuthTest(AccountCase):
    def test_needs_an_account(self):
        good = [("Authorization", "Basic " + base64.b64encode(b"ops:pa:ss").decode())]
        bad = [("Authorization", "Basic " + base64.b64encode(b"ops:nope").decode())]
        for path in (API + "namespaces", API + "tubes?prefix=a%2F"):
            for headers in (None, bad):
                r = self.adm("GET", path, headers=headers)
                self.assertError(r, 401, "unauthorized")
            self.assertEqual(self.adm("GET", path, headers=good).status, 200, path)
        xrw = [("X-Requested-With", "t")]
        for headers in (xrw, bad + xrw):
            r = self.adm("POST", API + "tubes/default/delete-dead", headers=headers)
            self.assertError(r, 401, "unauthorized")
        r = self.adm("POST", API + "tubes/default/delete-dead", headers=good + xrw)
        self.assertEqual((r.status, r.json()), (200, {"deleted": 0}))
        # The token routes the dashboard's token page uses need it as well.
        for method, path in (("GET", "/token/shop"), ("POST", "/token/shop?description=x"),
                             ("DELETE", "/token/shop/0123456789ab"), ("GET", "/limits"),
                             ("PUT", "/token/shop/0123456789ab/limit")):
            self.assertError(self.adm(method, path), 401, "unauthorized")


class ManyTubesTest(DashboardCase):
    """A page of the tree over thousands of tubes: the namespaces past the page cost no
    stats, the totals are right, and the names are looked at in slices."""

    NAMESPACES = 300
    QUEUES = 20  # each; 6000 tubes, three slices of names

    def test_totals_over_many_tubes(self):
        c = self.text()
        c.send(b"".join(b"use n%03d/q%02d\r\nput 0 0 60 1\r\nx\r\n" % (n, q)
                        for n in range(self.NAMESPACES) for q in range(self.QUEUES)))
        for _ in range(2 * self.NAMESPACES * self.QUEUES):
            c.read_line()
        before = self.ystats(c, "stats")
        g = self.djson("GET", "namespaces", {"limit": 3, "offset": 150, "step": 0})
        after = self.ystats(c, "stats")
        self.assertEqual(names(g), ["n149", "n150", "n151"])  # "default" is first
        self.assertTrue(g["more"])
        self.assertEqual(g["matched"], self.NAMESPACES * self.QUEUES + 1)
        for r in g["rows"]:
            self.assertEqual((r["queues"], r["ready"], r["total_jobs"]), (20, 20, 20), r)
        # The stats read are the page's namespaces' queues only (3 x 20); the names were
        # listed once per slice of 2500, twice over (grouping, then the page's queues).
        self.assertEqual(after["cmd-stats-tube"] - before["cmd-stats-tube"], 3 * self.QUEUES)
        self.assertEqual(after["cmd-list-tubes"] - before["cmd-list-tubes"], 2 * 3)


if __name__ == "__main__":
    unittest.main()

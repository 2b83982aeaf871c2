"""Black-box tests of `auth` on the beanstalkd port (docs/SECURITY.md, "Tokens on the
beanstalkd port"): the HTTP API's tokens on the text protocol, a namespace's connection
confined to its tubes and jobs (every command that names a tube or a job id), the admin
accounts, --require-auth, bad tokens, a token deleted while connected, the token's put
limit, and a server without tokens answering `auth` as beanstalkd does.

Run: python3 -m unittest -v tests/blackbox/test_auth_text.py   (binary: $STALKD_BIN)
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import HttpCase, Server, accounts_file, b64, parse_yaml  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import ok_list  # noqa: E402

OK = b"AUTHENTICATED\r\n"


def token_id(token):
    return token.split(":")[-1].split(".")[0]


class AuthTextCase(HttpCase):
    """A server with the HTTP listeners (so tokens), tokens of namespaces "ns" and "other"."""

    def setUp(self):
        super().setUp()
        self.other = self.new_token("other")

    def authed(self, token=None):
        c = self.text()
        self.assertEqual(c.cmd("auth " + (token or self.token)), OK)
        return c


class NamespaceTest(AuthTextCase):
    def test_clients_that_never_auth_see_no_change(self):
        c = self.text()
        self.assertEqual(c.cmd("use other/q"), b"USING other/q\r\n")
        jid = c.put_id("x")
        self.assertEqual(c.cmd("peek %d" % jid), b"FOUND %d 1\r\nx\r\n" % jid)
        self.assertEqual(c.cmd("list-tubes"), ok_list("default", "other/q"))

    def test_bad_tokens(self):
        c = self.text()
        for line in ("auth nope", "auth " + self.token + "x", "auth other " + self.token,
                     "auth " + token_id(self.token), "auth pool:" + self.token,
                     "auth root:pw"):
            self.assertEqual(c.cmd(line), b"UNAUTHORIZED\r\n", line)
        self.assertEqual(c.cmd("auth"), b"BAD_FORMAT\r\n")
        self.assertEqual(c.cmd("auth a b c"), b"BAD_FORMAT\r\n")
        # A refused auth changes nothing: still an anonymous client.
        self.assertEqual(c.cmd("use other/q"), b"USING other/q\r\n")
        for line in ("auth " + self.token, "auth ns " + self.token, "auth default:" + self.token,
                     "auth :" + self.token):
            self.assertEqual(c.cmd(line), OK, line)

    def test_chosen_token_needs_its_namespace(self):
        mine = "lmstfy-token-0123456789"
        r = self.adm("POST", "/token/ns", params={"description": "d", "token": mine})
        self.assertEqual(r.status, 201, r)
        c = self.text()
        self.assertEqual(c.cmd("auth " + mine), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth ns " + mine), OK)
        self.assertEqual(c.cmd("list-tube-used"), b"USING ns/default\r\n")

    def test_tubes_of_the_namespace_only(self):
        c = self.text()
        self.assertEqual(c.cmd("watch other/q"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("auth " + self.token), OK)
        # The namespace's "default", used and the only one watched.
        self.assertEqual(c.cmd("list-tube-used"), b"USING ns/default\r\n")
        self.assertEqual(c.cmd("list-tubes-watched"), ok_list("ns/default"))
        for line in ("use other/q", "watch other/q", "ignore default", "stats-tube other/q",
                     "pause-tube other/q 1", "purge other/q ready", "list-jobs other/q ready 0 10",
                     "tube-tries other/q 3", "use ns", "use ns/", "use nsx/q", "watch default"):
            self.assertEqual(c.cmd(line), b"FORBIDDEN\r\n", line)
        self.assertEqual(c.cmd("use ns/q"), b"USING ns/q\r\n")
        self.assertEqual(c.cmd("watch ns/q"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("ignore ns/default"), b"WATCHING 1\r\n")
        jid = c.put_id("hello")
        self.assertEqual(c.cmd("peek-ready"), b"FOUND %d 5\r\nhello\r\n" % jid)
        self.assertEqual(c.cmd("stats-tube ns/q").split(b"\r\n")[0][:3], b"OK ")
        self.assertEqual(c.cmd("pause-tube ns/q 0"), b"PAUSED\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 5\r\nhello\r\n" % jid)
        self.assertEqual(c.cmd("bury %d 0" % jid), b"BURIED\r\n")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 1\r\n")
        self.assertEqual(c.cmd("tube-tries ns/q 3"), b"TUBE-TRIES 3\r\n")
        # list-tubes shows the namespace's tubes only; stats stays global (counts only).
        anon = self.text()
        anon.put_id("y", tube="other/z")
        self.assertEqual(c.cmd("list-tubes"), ok_list("ns/q"))  # ns/default: unused, gone
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-jobs-ready"], "2")

    def test_jobs_of_other_namespaces_do_not_exist(self):
        theirs = self.authed(self.other)
        rid = theirs.put_id("reserved")
        self.assertEqual(theirs.cmd("reserve-with-timeout 0"), b"RESERVED %d 8\r\nreserved\r\n" % rid)
        tid = theirs.put_id("theirs")
        anon = self.text()
        aid = anon.put_id("anon")   # in "default": outside every namespace
        mine = self.authed()
        missing = max(tid, rid, aid) + 1000
        for verb in ("peek %d", "delete %d", "release %d 0 0", "bury %d 0", "touch %d",
                     "kick-job %d", "stats-job %d", "stats-job-ext %d", "reserve-job %d"):
            for jid in (tid, rid, aid, missing):
                self.assertEqual(mine.cmd(verb % jid), b"NOT_FOUND\r\n", verb % jid)
        own = mine.put_id("mine")
        self.assertEqual(mine.cmd("delete-many %d %d %d %d" % (tid, aid, own, missing)),
                         b"DELETED-MANY 1\r\n")
        self.assertEqual(mine.cmd("delete-many %d %d" % (tid, aid)), b"DELETED-MANY 0\r\n")
        # Nothing of theirs changed.
        self.assertEqual(anon.cmd("peek %d" % tid), b"FOUND %d 6\r\ntheirs\r\n" % tid)
        self.assertEqual(parse_yaml(anon.cmd("stats-job %d" % rid))["state"], "reserved")
        self.assertEqual(anon.cmd("peek %d" % aid), b"FOUND %d 4\r\nanon\r\n" % aid)
        # The other namespace's own commands on them work.
        self.assertEqual(theirs.cmd("delete %d" % tid), b"DELETED\r\n")

    def test_same_jobs_as_the_http_api(self):
        r = self.api("PUT", "/api/ns/q1", b"from http", params={"tries": 1})
        self.assertEqual(r.status, 201, r)
        jid = int(r.json()["job_id"])
        c = self.authed()
        self.assertEqual(c.cmd("watch ns/q1"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 9\r\nfrom http\r\n" % jid)
        self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        o = self.authed(self.other)
        self.assertEqual(o.cmd("watch ns/q1"), b"FORBIDDEN\r\n")

    def test_deleted_token_ends_the_identity(self):
        c = self.authed()
        jid = c.put_id("x")
        self.assertEqual(self.adm("DELETE", "/token/ns/" + token_id(self.token)).status, 204)
        # Not back to anonymous (which sees every tube): refused until auth again.
        self.assertEqual(c.cmd("peek %d" % jid), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd(b"put 0 0 1 1\r\nx"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("list-tubes"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth " + self.token), b"UNAUTHORIZED\r\n")
        fresh = self.new_token("ns")
        self.assertEqual(c.cmd("auth " + fresh), OK)
        self.assertEqual(c.cmd("peek %d" % jid), b"FOUND %d 1\r\nx\r\n" % jid)

    def test_put_limit_of_the_token(self):
        r = self.adm("POST", "/token/ns/%s/limit" % token_id(self.token),
                     b'{"read":0,"write":2,"interval":600}')
        self.assertEqual(r.status, 201, r)
        c = self.authed()
        c.put_id("1")
        self.assertEqual(c.cmd(b"put-ext 0 0 10 1\r\n2")[:9], b"INSERTED ")
        self.assertEqual(c.cmd(b"put 0 0 10 1\r\n3"), b"RATE_LIMITED\r\n")
        self.assertEqual(c.cmd(b"put-many 1 13\r\n0 0 1 2\r\nhi\r\n\r\n"), b"RATE_LIMITED\r\n")
        # The HTTP API's publishes count in the same window.
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x").status, 429)
        self.assertEqual(parse_yaml(c.cmd("stats-tube ns/default"))["current-jobs-ready"], "2")
        # Another token's connection is not limited.
        o = self.authed(self.other)
        o.put_id("x")


class RequireAuthTest(AuthTextCase):
    server_args = ("--require-auth",)

    def test_nothing_but_auth_and_quit_before_auth(self):
        c = self.text()
        for line in ("stats", "list-tubes", "use ns/q", "watch ns/q", "reserve-with-timeout 0",
                     "peek 1", "delete 1", "kick 1", "stats-tube default", "list-jobs default ready 0 1"):
            self.assertEqual(c.cmd(line), b"UNAUTHORIZED\r\n", line)
        # Bodies are skipped, never read as commands.
        self.assertEqual(c.cmd(b"put 0 0 1 5\r\nstats"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd(b"put-ext 0 0 1 5 ttl=9\r\nstats"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd(b"put-many 1 13\r\n0 0 1 2\r\nhi\r\n\r\n"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth wrong"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("stats"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth " + self.token), OK)
        jid = c.put_id("x")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % jid)
        q = self.text()
        q.send("quit\r\n")
        self.assertTrue(q.closed_by_peer())


class AdminAccountTest(AuthTextCase):
    def setUp(self):
        self.server_args = ("--admin-accounts", accounts_file(self, "root:pw\n"),
                            "--require-auth")
        super().setUp()

    def adm(self, method, path, body=b"", headers=None, params=None):
        auth = [("Authorization", "Basic " + b64("root:pw"))]
        return super().adm(method, path, body, list(headers or []) + auth, params)

    def test_admin_sees_everything(self):
        o = self.authed(self.other)
        tid = o.put_id("theirs")
        c = self.text()
        self.assertEqual(c.cmd("auth root:wrong"), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth root:pw"), OK)
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")
        self.assertEqual(c.cmd("peek %d" % tid), b"FOUND %d 6\r\ntheirs\r\n" % tid)
        self.assertEqual(c.cmd("list-tubes"), ok_list("default", "other/default"))
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-jobs-ready"], "1")


class NoTokensTest(unittest.TestCase):
    def test_auth_is_an_unknown_command_without_tokens(self):
        server = Server()   # no --http, --admin-http or --require-auth: as beanstalkd
        self.addCleanup(server.stop)
        c = server.connect()
        self.addCleanup(c.close)
        self.assertEqual(c.cmd("auth x"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd("use q"), b"USING q\r\n")


if __name__ == "__main__":
    unittest.main()

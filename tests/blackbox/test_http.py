"""Black-box tests of lmstfy's queue API over stalkd (docs/HTTP.md, sections 3 and 4):
publish, bulk, republish, consume (long poll, several queues, count, freeze_tries), delete,
peeks, size, destroy, dead letters; names, tokens and pools; every number parameter's
parsing; job ids; attributes; and the same jobs seen from the text protocol.

Admin API, metrics, health and persistence: test_http_admin.py. HTTP transport (limits,
malformed requests, keep-alive, pipelining, slow and vanishing clients): test_http_transport.py.

Run: python3 -m unittest -v tests/blackbox/test_http.py   (binary: $STALKD_BIN)
"""
import os
import re
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import (API_NOT_FOUND, CONSUME_KEYS, JOB_KEYS, NO_JOB, NS, HttpCase, b64,  # noqa: E402
                      parse_yaml, unb64, wait_until)

U32_MAX = "4294967295"


class PublishConsumeTest(HttpCase):
    def test_publish_consume_ack_cycle(self):
        t0 = time.monotonic()
        r = self.api("PUT", "/api/ns/q", b"hello", params={"ttl": 3600, "tries": 2})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(set(r.json()), {"msg", "job_id"})
        jid = r.json()["job_id"]
        self.assertIsInstance(jid, str)
        job = self.consume_job("q")
        self.assertEqual(job["namespace"], NS)
        self.assertEqual(job["queue"], "q")
        self.assertEqual(job["job_id"], jid)
        self.assertEqual(unb64(job["data"]), b"hello")
        self.assertIn(job["ttl"], (3599, 3600))
        self.assertIsInstance(job["elapsed_ms"], int)
        # elapsed_ms counts from the publish: never more than the time since before it.
        self.assertTrue(0 <= job["elapsed_ms"] <= (time.monotonic() - t0) * 1000 + 1, job)
        self.assertEqual(job["remain_tries"], 1)
        self.assertIsNone(job["attributes"])
        r = self.api("DELETE", "/api/ns/q/job/" + jid)
        self.assertEqual((r.status, r.body), (204, b""), r)
        self.assertError(self.api("GET", "/api/ns/q/job/" + jid), 404, "job not found")
        self.assertError(self.consume("q"), 404, "no job available", key="msg")

    def test_defaults_as_seen_by_the_text_protocol(self):
        jid = self.publish("q", b"body")
        st = self.job_stats(self.text(), jid)
        self.assertEqual(st["tube"].strip('"'), "ns/q")
        self.assertEqual(st["state"], "ready")
        self.assertEqual(st["pri"], "255")        # 255 - priority 0
        self.assertEqual(st["ttr"], "120")
        self.assertEqual(st["delay"], "0")
        self.assertEqual(st["tries-left"], "1")
        self.assertIn(st["ttl-left"], ("86399", "86400"))
        d = self.api("GET", "/api/ns/q/job/" + jid).json()
        self.assertEqual((d["remain_tries"], d["ttl"] in (86399, 86400)), (1, True))

    def test_ttl_rounded_to_the_nearest_second(self):
        # lmstfy shows Redis's TTL of the job: the time left rounded to the nearest second.
        # Its client's republish test publishes with ttl=10 and expects 10 at once. The TTL
        # counts from the publish as elapsed_ms does, so the expected value follows from it
        # (10 unless the consume came half a second or more after the publish).
        for republish in (False, True):
            jid = self.publish("q", b"x", ttl=10)
            if republish:
                old = self.consume_job("q", ttr=30)["job_id"]
                r = self.api("PUT", "/api/ns/q/job/" + old, b"x", params={"ttl": 10})
                self.assertEqual(r.status, 201, r)
                jid = r.json()["job_id"]
            d = self.consume_job("q", ttr=30)
            self.assertEqual(d["job_id"], jid)
            left = 10000 - d["elapsed_ms"]
            self.assertIn(d["ttl"], {(left + e + 500) // 1000 for e in (-1, 0, 1)}, d)
            self.api("DELETE", "/api/ns/q/job/" + jid)

    def test_elapsed_ms_grows(self):
        t0 = time.monotonic()
        jid = self.publish("q")
        time.sleep(0.3)
        d = self.api("GET", "/api/ns/q/job/" + jid).json()
        self.assertTrue(250 <= d["elapsed_ms"] <= (time.monotonic() - t0) * 1000 + 1, d)

    def test_every_byte_value_round_trips(self):
        body = bytes(range(256)) * 4 + b"\r\n\r\n\x00"
        jid = self.publish("q", body)
        self.assertEqual(unb64(self.api("GET", "/api/ns/q/job/" + jid).json()["data"]), body)
        self.assertEqual(unb64(self.consume_job("q")["data"]), body)

    def test_empty_body(self):
        jid = self.publish("q", b"")
        d = self.consume_job("q")
        self.assertEqual((d["job_id"], d["data"]), (jid, ""))

    def test_priority_maps_to_beanstalkd_pri_and_order(self):
        t = self.text()
        low = self.publish("q", b"low")
        high = self.publish("q", b"high", priority=200)
        high2 = self.publish("q", b"high2", priority=200)
        top = self.publish("q", b"top", priority=255)
        self.assertEqual(self.job_stats(t, low)["pri"], "255")
        self.assertEqual(self.job_stats(t, high)["pri"], "55")
        self.assertEqual(self.job_stats(t, top)["pri"], "0")
        self.assertEqual(self.api("GET", "/api/ns/q/peek").json()["job_id"], top)
        got = [self.consume_job("q")["job_id"] for _ in range(4)]
        self.assertEqual(got, [top, high, high2, low])

    def test_delay(self):
        t0 = time.monotonic()
        jid = self.publish("q", b"later", delay=1)
        self.assertEqual(self.job_stats(self.text(), jid)["state"], "delayed")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)
        self.assertError(self.api("GET", "/api/ns/q/peek"), 404, "job not found")
        self.assertError(self.consume("q"), 404, "no job available", key="msg")
        d = self.consume_job("q", timeout=3)
        self.assertEqual(d["job_id"], jid)
        el = time.monotonic() - t0
        self.assertGreaterEqual(el, 0.8)     # not before its delay (an upper bound is no test's)

    def test_ttl_expiry(self):
        jid = self.publish("q", b"short", ttl=1)
        d = self.api("GET", "/api/ns/q/job/" + jid).json()
        self.assertIn(d["ttl"], (0, 1))
        self.assertTrue(wait_until(lambda: self.api("GET", "/api/ns/q/job/" + jid).status == 404,
                                   timeout=3.5, interval=0.1), "job did not expire")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)
        self.assertError(self.consume("q"), 404, "no job available", key="msg")

    def test_ttl_zero_is_forever(self):
        jid = self.publish("q", ttl=0)
        self.assertEqual(self.consume_job("q")["ttl"], 0)
        self.assertNotIn("ttl-left", self.job_stats(self.text(), jid))

    def test_ttl_shorter_than_delay(self):
        self.assertError(self.api("PUT", "/api/ns/q", params={"ttl": 1, "delay": 2}), 400,
                         "ttl is shorter than delay")
        self.publish("q", ttl=0, delay=5)
        self.publish("q", ttl=5, delay=5)
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)

    def test_tries_run_out_into_the_dead_letter_after_ttr(self):
        jid = self.publish("q", b"fragile", tries=2)
        d = self.consume_job("q", ttr=1)
        self.assertEqual((d["job_id"], d["remain_tries"]), (jid, 1))
        t0 = time.monotonic()
        d = self.consume_job("q", ttr=1, timeout=4)    # back after its TTR
        self.assertEqual((d["job_id"], d["remain_tries"]), (jid, 0))
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)
        self.assertTrue(wait_until(
            lambda: self.api("GET", "/api/ns/q/deadletter/size").json()["size"] == 1,
            timeout=4, interval=0.1), "no dead letter")
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json(),
                         {"namespace": NS, "queue": "q", "deadletter_size": 1,
                          "deadletter_head": jid})
        st = self.job_stats(self.text(), jid)
        self.assertEqual((st["state"], st["bury-reason"]), ("buried", "timeout"))
        self.assertError(self.consume("q"), 404, "no job available", key="msg")

    def test_freeze_tries(self):
        jid = self.publish("q", tries=1)
        d = self.consume_job("q", ttr=1, freeze_tries="true")
        self.assertEqual((d["job_id"], d["remain_tries"]), (jid, 1))
        d = self.consume_job("q", ttr=1, timeout=4, freeze_tries="false")
        self.assertEqual((d["job_id"], d["remain_tries"]), (jid, 0))

    def test_freeze_tries_values(self):
        for v in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
            r = self.consume("q", freeze_tries=v)
            self.assertEqual(r.status, 404, (v, r))
        for v in ("", "yes", "2", "tRUE", "on", "%20true"):
            self.assertError(self.consume("q", freeze_tries=v), 400, "invalid freeze_tries value")

    def test_ttr_zero_is_one_second(self):
        jid = self.publish("q", tries=2)
        self.assertEqual(self.consume_job("q", ttr=0)["job_id"], jid)
        t0 = time.monotonic()
        self.assertEqual(self.consume_job("q", timeout=4)["job_id"], jid)
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_consumed_job_is_reserved_and_detached(self):
        jid = self.publish("q", tries=3)
        c = self.conn()
        r = c.request("GET", "/api/ns/q?ttr=60", headers={"X-Token": self.token})
        self.assertEqual(r.json()["job_id"], jid)
        c.close()   # the reservation does not belong to the connection
        time.sleep(0.2)
        t = self.text()
        st = self.job_stats(t, jid)
        self.assertEqual(st["state"], "reserved")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)
        d = self.api("GET", "/api/ns/q/job/" + jid).json()
        self.assertEqual(d["remain_tries"], 2)
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/" + jid).status, 204)
        self.assertEqual(t.cmd("stats-job %s" % jid), b"NOT_FOUND\r\n")

    def test_text_connection_acts_on_a_consumed_job(self):
        a = self.publish("q", b"a", tries=3)
        b = self.publish("q", b"b", tries=3)
        t = self.text()
        self.assertEqual(self.consume_job("q")["job_id"], a)
        self.assertEqual(t.cmd("delete %s" % a), b"DELETED\r\n")
        self.assertEqual(self.consume_job("q")["job_id"], b)
        self.assertEqual(t.cmd("release %s 0 0" % b), b"RELEASED\r\n")
        d = self.consume_job("q")
        self.assertEqual((d["job_id"], d["remain_tries"]), (b, 1))
        self.assertEqual(t.cmd("bury %s 0" % b), b"BURIED\r\n")
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json()["deadletter_head"], b)

    def test_http_job_reserved_over_the_text_protocol(self):
        jid = self.publish("q", b"hello", tries=2, priority=7)
        t = self.text()
        self.assertEqual(t.cmd("watch ns/q"), b"WATCHING 2\r\n")
        self.assertEqual(t.cmd("reserve-with-timeout 0"), b"RESERVED %s 5\r\nhello\r\n" % jid.encode())
        self.assertEqual(self.job_stats(t, jid)["tries-left"], "1")
        # an ordinary reservation belongs to its connection: HTTP delete leaves it alone
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/" + jid).status, 204)
        self.assertEqual(self.job_stats(t, jid)["state"], "reserved")
        self.assertEqual(t.cmd("delete %s" % jid), b"DELETED\r\n")
        self.assertError(self.api("GET", "/api/ns/q/job/" + jid), 404, "job not found")

    def test_text_job_consumed_over_http(self):
        t = self.text()
        self.assertEqual(t.cmd("use ns/q"), b"USING ns/q\r\n")
        r = t.put(b"from text")
        jid = re.fullmatch(rb"INSERTED (\d+)\r\n", r).group(1).decode()
        d = self.consume_job("q")
        self.assertEqual((d["job_id"], unb64(d["data"]), d["ttl"], d["remain_tries"],
                          d["attributes"]), (jid, b"from text", 0, 65535, None))
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/" + jid).status, 204)
        self.assertEqual(t.cmd("peek %s" % jid), b"NOT_FOUND\r\n")

    def test_delete_is_idempotent(self):
        jid = self.publish("q")
        for _ in range(2):
            r = self.api("DELETE", "/api/ns/q/job/" + jid)
            self.assertEqual((r.status, r.body), (204, b""))
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/999999").status, 204)

    def test_delete_any_state(self):
        ready = self.publish("q")
        delayed = self.publish("q", delay=100)
        reserved = self.publish("q", priority=255)
        self.assertEqual(self.consume_job("q")["job_id"], reserved)
        t = self.text()
        t.cmd("use ns/q")
        buried = re.fullmatch(rb"INSERTED (\d+)\r\n", t.put(b"b")).group(1).decode()
        self.assertTrue(t.cmd("reserve-job %s" % buried).startswith(b"RESERVED"))
        self.assertEqual(t.cmd("bury %s 0" % buried), b"BURIED\r\n")
        for jid in (ready, delayed, reserved, buried):
            self.assertEqual(self.api("DELETE", "/api/ns/q/job/" + jid).status, 204)
            self.assertEqual(t.cmd("stats-job %s" % jid), b"NOT_FOUND\r\n", jid)

    def test_job_of_another_tube_is_not_found(self):
        jid = self.publish("q1", b"mine")
        self.assertError(self.api("GET", "/api/ns/q2/job/" + jid), 404, "job not found")
        self.assertEqual(self.api("DELETE", "/api/ns/q2/job/" + jid).status, 204)
        self.assertEqual(self.api("GET", "/api/ns/q1/job/" + jid).status, 200)
        # nor from another namespace, with that namespace's token
        other = self.new_token("other")
        self.assertError(self.api("GET", "/api/other/q1/job/" + jid, token=other), 404, "job not found")
        self.assertEqual(self.api("DELETE", "/api/other/q1/job/" + jid, token=other).status, 204)
        r = self.api("PUT", "/api/other/q1/job/" + jid, b"new", token=other)
        self.assertEqual(r.status, 201)
        self.assertEqual(unb64(self.api("GET", "/api/ns/q1/job/" + jid).json()["data"]), b"mine")
        # a job put over the text protocol into a plain tube is not in any queue
        t = self.text()
        plain = re.fullmatch(rb"INSERTED (\d+)\r\n", t.put(b"plain")).group(1).decode()
        self.assertError(self.api("GET", "/api/ns/default/job/" + plain), 404, "job not found")
        self.assertEqual(self.api("DELETE", "/api/ns/q1/job/" + plain).status, 204)
        self.assertTrue(t.cmd("peek %s" % plain).startswith(b"FOUND"))

    def test_invalid_job_ids(self):
        jid = self.publish("q")
        for bad in ("abc", "-1", "+1", "1.0", "0x10", "1e3", "%20" + jid, jid + "%20",
                    "1" * 21, "18446744073709551616", "99999999999999999999"):
            for method in ("GET", "DELETE", "PUT"):
                self.assertError(self.api(method, "/api/ns/q/job/" + bad), 400, "invalid job id")
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + jid).status, 200)   # untouched
        self.assertError(self.api("GET", "/api/ns/q/job/18446744073709551615"), 404, "job not found")
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/18446744073709551615").status, 204)
        self.assertError(self.api("GET", "/api/ns/q/job/0"), 404, "job not found")
        self.assertEqual(self.api("GET", "/api/ns/q/job/000" + jid).json()["job_id"], jid)

    def test_peek_queue(self):
        self.assertError(self.api("GET", "/api/ns/q/peek"), 404, "job not found")
        a = self.publish("q", b"a", tries=3)
        b = self.publish("q", b"b", tries=3, priority=5)
        self.publish("q", b"c", delay=100, priority=255)
        r = self.api("GET", "/api/ns/q/peek")
        self.assertEqual(r.status, 200)
        d = r.json()
        self.assertEqual(set(d), JOB_KEYS)
        self.assertEqual((d["job_id"], unb64(d["data"]), d["remain_tries"], d["namespace"], d["queue"]),
                         (b, b"b", 3, NS, "q"))
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 2)   # not reserved
        self.assertEqual(self.consume_job("q")["job_id"], b)
        self.assertEqual(self.api("GET", "/api/ns/q/peek").json()["job_id"], a)

    def test_peek_job_in_every_state(self):
        ready = self.publish("q", b"r")
        delayed = self.publish("q", b"d", delay=100)
        reserved = self.publish("q", b"v", priority=9)
        self.assertEqual(self.consume_job("q", ttr=60)["job_id"], reserved)
        t = self.text()
        t.cmd("use ns/q")
        buried = re.fullmatch(rb"INSERTED (\d+)\r\n", t.put(b"b")).group(1).decode()
        t.cmd("reserve-job %s" % buried)
        t.cmd("bury %s 0" % buried)
        for jid, data in ((ready, b"r"), (delayed, b"d"), (reserved, b"v"), (buried, b"b")):
            r = self.api("GET", "/api/ns/q/job/" + jid)
            self.assertEqual(r.status, 200, r)
            d = r.json()
            self.assertEqual(set(d), JOB_KEYS)
            self.assertEqual((d["job_id"], unb64(d["data"]), d["queue"]), (jid, data, "q"))

    def test_size_counts_ready_jobs_and_needs_no_token(self):
        self.assertEqual(self.api("GET", "/api/ns/nosuch/size").json(),
                         {"namespace": NS, "queue": "nosuch", "size": 0})
        for _ in range(3):
            self.publish("q")
        self.publish("q", delay=100)
        self.assertEqual(self.api("GET", "/api/ns/q/size").json(),
                         {"namespace": NS, "queue": "q", "size": 3})
        self.consume_job("q")
        for tok in (None, "bogus", "default:bogus"):
            self.assertEqual(self.api("GET", "/api/ns/q/size", token=tok).json()["size"], 2)
        self.assertError(self.api("GET", "/api/ns/q/size", token="other:bogus"), 404, "pool not found")

    def test_destroy_queue_deletes_ready_jobs_only(self):
        self.publish("q")
        self.publish("q")
        delayed = self.publish("q", delay=100)
        reserved = self.publish("q", priority=255)
        self.assertEqual(self.consume_job("q")["job_id"], reserved)
        t = self.text()
        t.cmd("use ns/q")
        buried = re.fullmatch(rb"INSERTED (\d+)\r\n", t.put(b"b")).group(1).decode()
        t.cmd("reserve-job %s" % buried)
        t.cmd("bury %s 0" % buried)
        r = self.api("DELETE", "/api/ns/q")
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)
        for jid in (delayed, reserved, buried):
            self.assertEqual(self.api("GET", "/api/ns/q/job/" + jid).status, 200, jid)
        self.assertEqual(self.api("DELETE", "/api/ns/nosuch").status, 204)


class AttributeTest(HttpCase):
    def test_round_trip_and_lower_case_names(self):
        # lmstfy's server keeps the name after Job-Attr- in lower case (strings.ToLower).
        hdrs = [("Job-Attr-Color", "red"), ("job-attr-SIZE", "XL"), ("JOB-ATTR-my_key-x", "v 1"),
                ("Job-Attr-Empty", ""), ("Job-Attr-color", "blue"), ("X-Other", "no")]
        jid = self.publish("q", b"x", headers=hdrs)
        want = {"color": "red", "size": "XL", "my_key-x": "v 1"}
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + jid).json()["attributes"], want)
        self.assertEqual(self.api("GET", "/api/ns/q/peek").json()["attributes"], want)
        d = self.consume_job("q")
        self.assertEqual(d["attributes"], want)
        self.assertEqual(list(d["attributes"]), sorted(want))
        st = self.job_stats(self.text(), jid)
        self.assertEqual(st["attr.color"].strip('"'), "red")
        self.assertEqual(st["attr.size"].strip('"'), "XL")

    def test_lmstfy_go_client_attribute(self):
        # lmstfy's Go client sends the name upper-cased and reads it back lower-cased.
        jid = self.publish("q", b"x", headers=[("Job-Attr-HELLO", "world")])
        self.assertEqual(self.consume_job("q")["attributes"], {"hello": "world"})
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + jid).json()["attributes"],
                         {"hello": "world"})

    def test_enable_job_version_header_is_not_needed_and_ignored(self):
        a = self.publish("q", headers=[("Job-Attr-A", "1")])
        b = self.publish("q", headers=[("Enable-Job-Version", "YES"), ("Job-Attr-A", "2")])
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + a).json()["attributes"], {"a": "1"})
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + b).json()["attributes"], {"a": "2"})

    def test_attribute_made_over_the_text_protocol(self):
        t = self.text()
        t.cmd("use ns/q")
        r = t.cmd(b"put-ext 0 0 60 1 attr.Tag=abc\r\nz\r\n")
        jid = re.fullmatch(rb"INSERTED (\d+)\r\n", r).group(1).decode()
        self.assertEqual(self.consume_job("q")["attributes"], {"Tag": "abc"})
        self.assertEqual(self.consume("q").status, 404, jid)

    def test_limits(self):
        sixteen = [("Job-Attr-A%d" % i, "v") for i in range(16)]
        self.publish("q", headers=sixteen)
        self.assertError(self.api("PUT", "/api/ns/q", b"x", headers=sixteen + [("Job-Attr-B", "v")]),
                         400, "too many attributes, cannot exceed 16")
        # empty values are not attributes, so they do not count
        self.publish("q", headers=sixteen + [("Job-Attr-B", "")])
        self.publish("q", headers=[("Job-Attr-" + "N" + "n" * 63, "v")])
        self.assertError(self.api("PUT", "/api/ns/q", b"x", headers=[("Job-Attr-" + "N" * 65, "v")]),
                         400, "attribute name too long, cannot exceed 64")
        self.publish("q", headers=[("Job-Attr-V", "v" * 255)])
        self.assertError(self.api("PUT", "/api/ns/q", b"x", headers=[("Job-Attr-V", "v" * 256)]),
                         400, "attribute value too long, cannot exceed 255")
        for name in ("Job-Attr-a.b", "Job-Attr-a!b", "Job-Attr-"):
            self.assertError(self.api("PUT", "/api/ns/q", b"x", headers=[(name, "v")]),
                             400, "invalid attribute name")
        self.assertError(self.api("PUT", "/api/ns/q", b"x", headers=[("Job-Attr-T", "a\tb")]),
                         400, "invalid attribute value")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 4)

    def test_attributes_on_bulk_and_republish(self):
        r = self.api("PUT", "/api/ns/q/bulk", b'["a","b"]', headers=[("Job-Attr-K", "v")])
        ids = r.json()["job_ids"]
        for jid in ids:
            self.assertEqual(self.api("GET", "/api/ns/q/job/" + jid).json()["attributes"], {"k": "v"})
        r = self.api("PUT", "/api/ns/q/job/" + ids[0], b"c", headers=[("Job-Attr-New", "1")])
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + r.json()["job_id"]).json()["attributes"],
                         {"new": "1"})
        r = self.api("PUT", "/api/ns/q/bulk", b'["a"]', headers=[("Job-Attr-V", "v" * 256)])
        self.assertError(r, 400, "attribute value too long, cannot exceed 255")


class RepublishTest(HttpCase):
    def test_republish_deletes_and_publishes_anew(self):
        old = self.publish("q", b"first", tries=1)
        self.assertEqual(self.consume_job("q", ttr=60)["job_id"], old)
        r = self.api("PUT", "/api/ns/q/job/" + old, b"second", params={"tries": 3, "ttl": 100})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(set(r.json()), {"msg", "job_id"})
        new = r.json()["job_id"]
        self.assertNotEqual(new, old)
        self.assertError(self.api("GET", "/api/ns/q/job/" + old), 404, "job not found")
        d = self.consume_job("q")
        self.assertEqual((d["job_id"], unb64(d["data"]), d["remain_tries"]), (new, b"second", 2))
        self.assertTrue(d["ttl"] <= 100)

    def test_republish_of_unknown_job_just_publishes(self):
        r = self.api("PUT", "/api/ns/q/job/424242", b"x")
        self.assertEqual(r.status, 201)
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 1)

    def test_bad_republish_deletes_nothing(self):
        old = self.publish("q", b"keep")
        for params, err in (({"ttl": "x"}, "invalid ttl"), ({"tries": 0}, "tries shouldn't be zero"),
                            ({"delay": -1}, "invalid delay"), ({"priority": 256}, "invalid priority")):
            self.assertError(self.api("PUT", "/api/ns/q/job/" + old, b"x", params=params), 400, err)
        self.assertEqual(self.api("GET", "/api/ns/q/job/" + old).status, 200)
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 1)

    def test_republish_with_delay(self):
        old = self.publish("q")
        new = self.api("PUT", "/api/ns/q/job/" + old, b"x", params={"delay": 100}).json()["job_id"]
        self.assertEqual(self.job_stats(self.text(), new)["state"], "delayed")


class BulkTest(HttpCase):
    def bulk(self, body, **params):
        return self.api("PUT", "/api/ns/q/bulk", body, params=params)

    def test_one_and_sixty_four(self):
        r = self.bulk(b'[{"n":0}]')
        self.assertEqual(r.status, 201, r)
        self.assertEqual(set(r.json()), {"msg", "job_ids"})
        self.assertEqual(r.json()["msg"], "published")
        self.assertEqual(len(r.json()["job_ids"]), 1)
        body = "[" + ",".join('{"n":%d}' % i for i in range(64)) + "]"
        ids = self.bulk(body, tries=2, ttl=500).json()["job_ids"]
        self.assertEqual(len(ids), 64)
        self.assertEqual(len(set(ids)), 64)
        self.assertEqual(unb64(self.consume_job("q")["data"]), b'{"n":0}')
        for i in range(64):
            d = self.consume_job("q")
            self.assertEqual((d["job_id"], unb64(d["data"]), d["remain_tries"]),
                             (ids[i], b'{"n":%d}' % i, 1))
            self.assertTrue(d["ttl"] <= 500)

    def test_element_json_text_is_the_body(self):
        ids = self.bulk(b' [ "a" , {"k": 1} ,3,null,[1, 2]] ').json()["job_ids"]
        bodies = [unb64(self.api("GET", "/api/ns/q/job/" + j).json()["data"]) for j in ids]
        self.assertEqual(bodies, [b'"a"', b'{"k": 1}', b"3", b"null", b"[1, 2]"])

    def test_errors(self):
        body65 = "[" + ",".join(["1"] * 65) + "]"
        self.assertError(self.bulk(body65), 400, "too many jobs")
        self.assertError(self.bulk(b"[]"), 400, "no jobs")
        self.assertError(self.bulk(b"null"), 400, "no jobs")
        for bad in (b'{"a":1}', b'"str"', b"42", b"not json", b"", b"[1,", b"[1]x"):
            self.assertError(self.bulk(bad), 400, "request body should be an array of objects")
        self.assertError(self.bulk(b"[1]", ttl=1, delay=2), 400, "ttl is shorter than delay")
        self.assertError(self.bulk(b"[1]", tries=0), 400, "tries shouldn't be zero")
        self.assertError(self.bulk(b"[1]", delay="x"), 400, "invalid delay")
        self.assertError(self.bulk(b"[1]", priority=256), 400, "invalid priority")
        # parameters are checked before the body
        self.assertError(self.bulk(b"nonsense", tries="x"), 400, "invalid tries")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)

    def test_priority_and_delay(self):
        self.publish("q", b"plain")
        ids = self.bulk(b"[1,2]", priority=100).json()["job_ids"]
        self.assertEqual([self.consume_job("q")["job_id"] for _ in range(2)], ids)
        ids = self.bulk(b"[1]", delay=100).json()["job_ids"]
        self.assertEqual(self.job_stats(self.text(), ids[0])["state"], "delayed")


class BulkJobSizeTest(HttpCase):
    server_args = ("-z", "100")

    def test_element_larger_than_max_job_size(self):
        ok = '["%s"]' % ("a" * 98)        # element of 100 bytes with its quotes
        self.assertEqual(self.api("PUT", "/api/ns/q/bulk", ok).status, 201)
        big = '[1, "%s"]' % ("a" * 99)
        self.assertError(self.api("PUT", "/api/ns/q/bulk", big), 413, "job too large")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 1)

    def test_publish_body_larger_than_max_job_size(self):
        self.publish("q", b"a" * 100)
        c = self.conn()
        r = c.request("PUT", "/api/ns/q", b"a" * 101, headers={"X-Token": self.token})
        self.assertError(r, 413, "body too large")
        # the body was read (it is within max(65535, -z)): the connection is still usable
        self.assertEqual(c.request("GET", "/api/ns/q/size").json()["size"], 1)


class ConsumeTest(HttpCase):
    def test_count(self):
        ids = [self.publish("q", b"%d" % i) for i in range(5)]
        r = self.consume("q", count=3)
        self.assertEqual(r.status, 200)
        jobs = r.json()
        self.assertIsInstance(jobs, list)
        self.assertEqual([j["job_id"] for j in jobs], ids[:3])
        for j in jobs:
            self.assertEqual(set(j), CONSUME_KEYS)
            self.assertEqual(j["msg"], "new job")
        jobs = self.consume("q", count=100).json()
        self.assertEqual([j["job_id"] for j in jobs], ids[3:])
        self.assertError(self.consume("q", count=10), 404, "no job available", key="msg")
        self.publish("q")
        self.assertIsInstance(self.consume("q", count=2).json(), list)   # an array even of one
        self.publish("q")
        self.assertIsInstance(self.consume("q", count=1).json(), dict)

    def test_count_takes_from_one_queue(self):
        a = self.publish("q1")
        self.publish("q2")
        self.publish("q2")
        jobs = self.consume("q1,q2", count=3, timeout=1).json()
        self.assertEqual([(j["job_id"], j["queue"]) for j in jobs], [(a, "q1")])
        jobs = self.consume("q1,q2", count=3, timeout=1).json()
        self.assertEqual([j["queue"] for j in jobs], ["q2", "q2"])

    def test_count_long_poll(self):
        def later():
            self.wait_waiting("ns/q", 1)
            self.publish_other("q", b"late")
        th = threading.Thread(target=later)
        th.start()
        r = self.consume("q", count=5, timeout=60)
        th.join()
        self.assertEqual(r.status, 200, r)
        self.assertEqual([unb64(j["data"]) for j in r.json()], [b"late"])

    def publish_other(self, q, body, **params):
        """Publish on a connection of its own (the test's is busy in a long poll)."""
        c = self.conn()
        r = c.request("PUT", "/api/ns/%s" % q, body, headers={"X-Token": self.token})
        self.assertEqual(r.status, 201, r)
        return r.json()["job_id"]

    def test_multi_queue_order_beats_priority(self):
        low = self.publish("q1", b"low", priority=0)
        high = self.publish("q2", b"high", priority=255)
        d = self.consume_job("q1,q2", timeout=1)
        self.assertEqual((d["job_id"], d["queue"]), (low, "q1"))
        low2 = self.publish("q1", b"low2")
        d = self.consume_job("q2,q1", timeout=1)
        self.assertEqual((d["job_id"], d["queue"]), (high, "q2"))
        d = self.consume_job("q3,q2,q1", timeout=1)
        self.assertEqual((d["job_id"], d["queue"]), (low2, "q1"))

    def test_multi_queue_needs_timeout(self):
        self.publish("q1")
        for params in ({}, {"timeout": 0}, {"count": 2}):
            self.assertError(self.consume("q1,q2", **params), 400,
                             "timeout must be provided to consume multiple queues")
        # one queue left after dropping empty items: no timeout needed
        self.assertEqual(self.consume("q1,,").status, 200)

    def test_queue_list_checks(self):
        self.assertError(self.consume(",,", timeout=1), 400, "invalid queue name(s)")
        self.assertError(self.consume("q1,_q2", timeout=1), 400, "queue name contains forbidden characters")
        self.assertError(self.consume("q1,q.2", timeout=1), 400, "queue name contains forbidden characters")
        self.assertError(self.consume("q1," + "x" * 256, timeout=1), 400, "namespace or queue name too long")
        self.assertError(self.consume("q1," + "x" * 198, timeout=1), 400, "namespace or queue name too long")
        self.assertError(self.api("GET", "/api/n.s/q1,q2?timeout=1"), 400,
                         "namespace name contains forbidden characters")

    def test_long_poll_woken_by_http_publish(self):
        res = {}

        def waiter():
            res["r"] = self.consume("q", timeout=60)
        th = threading.Thread(target=waiter)
        th.start()
        self.wait_waiting("ns/q", 1)
        jid = self.publish_other("q", b"wake")
        th.join(90)
        self.assertEqual(res["r"].status, 200, res["r"])
        self.assertEqual(res["r"].json()["job_id"], jid)

    def test_long_poll_woken_by_text_put(self):
        res = {}

        def waiter():
            res["r"] = self.consume("q2,q", timeout=60)
        th = threading.Thread(target=waiter)
        th.start()
        self.wait_waiting("ns/q", 1)
        t = self.text()
        t.cmd("use ns/q")
        jid = re.fullmatch(rb"INSERTED (\d+)\r\n", t.put(b"from text")).group(1).decode()
        th.join(90)
        d = res["r"].json()
        self.assertEqual((d["job_id"], d["queue"], unb64(d["data"])), (jid, "q", b"from text"))

    def test_long_poll_woken_by_delay_ending(self):
        jid = self.publish("q", delay=1)
        t0 = time.monotonic()
        self.assertEqual(self.consume_job("q", timeout=5)["job_id"], jid)
        self.assertGreaterEqual(time.monotonic() - t0, 0.7)

    def test_long_poll_times_out(self):
        t0 = time.monotonic()
        self.assertError(self.consume("q", timeout=1), 404, "no job available", key="msg")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertError(self.consume("q"), 404, "no job available", key="msg")

    def test_two_waiters_get_one_job_each(self):
        res = []

        def waiter():
            c = self.conn()
            res.append(c.request("GET", "/api/ns/q?timeout=60", headers={"X-Token": self.token}))
        ths = [threading.Thread(target=waiter) for _ in range(2)]
        for th in ths:
            th.start()
        self.wait_waiting("ns/q", 2)
        a = self.publish("q")
        b = self.publish("q")
        for th in ths:
            th.join(90)
        self.assertEqual(sorted(r.json()["job_id"] for r in res), sorted([a, b]))


class DeadLetterTest(HttpCase):
    def bury(self, t, body):
        t.cmd("use ns/q")
        jid = re.fullmatch(rb"INSERTED (\d+)\r\n", t.put(body)).group(1).decode()
        self.assertTrue(t.cmd("reserve-job %s" % jid).startswith(b"RESERVED"))
        self.assertEqual(t.cmd("bury %s 0" % jid), b"BURIED\r\n")
        return jid

    def test_empty(self):
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json(),
                         {"namespace": NS, "queue": "q", "deadletter_size": 0, "deadletter_head": ""})
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter/size").json(),
                         {"namespace": NS, "queue": "q", "size": 0})
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter", params={"limit": 5}).json(),
                         {"msg": "respawned", "count": 0})
        self.assertEqual(self.api("DELETE", "/api/ns/q/deadletter").status, 204)

    def test_bury_lands_in_the_dead_letter_and_respawn_order(self):
        t = self.text()
        a, b, c = (self.bury(t, x) for x in (b"a", b"b", b"c"))
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json(),
                         {"namespace": NS, "queue": "q", "deadletter_size": 3, "deadletter_head": a})
        for tok in (None, "nonsense"):
            self.assertEqual(self.api("GET", "/api/ns/q/deadletter/size", token=tok).json()["size"], 3)
        r = self.api("PUT", "/api/ns/q/deadletter", params={"limit": 2})
        self.assertEqual((r.status, r.json()), (200, {"msg": "respawned", "count": 2}))
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json()["deadletter_head"], c)
        d1, d2 = self.consume_job("q"), self.consume_job("q")
        self.assertEqual((d1["job_id"], d2["job_id"]), (a, b))
        self.assertEqual(d1["remain_tries"], 0)          # respawned with tries 1
        self.assertIn(d1["ttl"], (86399, 86400))         # default ttl
        self.assertEqual(self.job_stats(t, c)["state"], "buried")

    def test_respawn_ttl_and_limit(self):
        t = self.text()
        a = self.bury(t, b"a")
        b = self.bury(t, b"b")
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter", params={"ttl": 0}).json()["count"], 1)
        self.assertEqual(self.consume_job("q")["ttl"], 0)
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter",
                                  params={"ttl": 5, "limit": 100}).json()["count"], 1)
        d = self.consume_job("q")
        self.assertEqual(d["job_id"], b)
        self.assertIn(d["ttl"], (4, 5))
        self.assertNotEqual(a, b)

    def test_respawned_job_with_tries_left_gets_tries_one(self):
        jid = self.publish("q", tries=5)
        self.consume_job("q", ttr=60)
        t = self.text()
        self.assertEqual(t.cmd("bury %s 0" % jid), b"BURIED\r\n")
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter").json()["count"], 1)
        self.assertEqual(self.job_stats(t, jid)["tries-left"], "1")

    def test_exhausted_job_respawned_and_dies_again(self):
        jid = self.publish("q", tries=1)
        self.consume_job("q", ttr=1)
        dl = lambda: self.api("GET", "/api/ns/q/deadletter/size").json()["size"]  # noqa: E731
        self.assertTrue(wait_until(lambda: dl() == 1, timeout=4, interval=0.1))
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter").json()["count"], 1)
        d = self.consume_job("q", ttr=1)
        self.assertEqual((d["job_id"], d["remain_tries"]), (jid, 0))
        self.assertTrue(wait_until(lambda: dl() == 1, timeout=4, interval=0.1))

    def test_delete_dead_letters(self):
        t = self.text()
        ids = [self.bury(t, b"%d" % i) for i in range(3)]
        r = self.api("DELETE", "/api/ns/q/deadletter", params={"limit": 2})
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json()["deadletter_head"], ids[2])
        for jid in ids[:2]:
            self.assertEqual(t.cmd("stats-job %s" % jid), b"NOT_FOUND\r\n")
        self.assertEqual(self.api("DELETE", "/api/ns/q/deadletter").status, 204)
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter/size").json()["size"], 0)

    def test_limit_and_ttl_checks(self):
        self.bury(self.text(), b"x")
        for method in ("PUT", "DELETE"):
            for bad in ("0", "-1", "x", "", "1.5", "9223372036854775808", "%201"):
                self.assertError(self.api(method, "/api/ns/q/deadletter", params={"limit": bad}),
                                 400, "invalid limit")
        for bad in ("-1", "x", "", "4294967296", "9223372036854775808"):
            self.assertError(self.api("PUT", "/api/ns/q/deadletter", params={"ttl": bad}), 400, "invalid ttl")
        # limit is checked before ttl
        self.assertError(self.api("PUT", "/api/ns/q/deadletter", params={"limit": 0, "ttl": "x"}),
                         400, "invalid limit")
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter/size").json()["size"], 1)
        # int64 parsing: a + sign is accepted
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter",
                                  params={"limit": "%2B9223372036854775807", "ttl": "%2B4294967295"}
                                  ).json()["count"], 1)


class NamesTokensPoolsTest(HttpCase):
    ROUTES = (("PUT", "/api/%s/%s"), ("PUT", "/api/%s/%s/bulk"), ("GET", "/api/%s/%s"),
              ("GET", "/api/%s/%s/peek"), ("GET", "/api/%s/%s/size"), ("DELETE", "/api/%s/%s"),
              ("GET", "/api/%s/%s/job/1"), ("DELETE", "/api/%s/%s/job/1"), ("PUT", "/api/%s/%s/job/1"),
              ("GET", "/api/%s/%s/deadletter"), ("PUT", "/api/%s/%s/deadletter"),
              ("DELETE", "/api/%s/%s/deadletter"), ("GET", "/api/%s/%s/deadletter/size"))

    def test_name_checks_on_every_route(self):
        cases = (("n" * 256, "q", "namespace or queue name too long"),
                 ("ns", "q" * 256, "namespace or queue name too long"),
                 ("n" * 150, "q" * 50, "namespace or queue name too long"),
                 ("n.s", "q", "namespace name contains forbidden characters"),
                 ("-ns", "q", "namespace name contains forbidden characters"),
                 ("ns", "_q", "queue name contains forbidden characters"),
                 ("ns", "q~", "queue name contains forbidden characters"))
        for ns, q, err in cases:
            for method, path in self.ROUTES:
                # names are checked before the token
                r = self.api(method, path % (ns, q), b"[1]", token=None)
                self.assertError(r, 400, err)
        # the longest tube: 200 bytes
        tok = self.new_token("n" * 100)
        self.publish("q" * 99, ns="n" * 100, token=tok)
        self.assertEqual(self.api("GET", "/api/%s/%s/size" % ("n" * 100, "q" * 99)).json()["size"], 1)
        self.assertEqual(self.text().cmd("stats-tube %s/%s" % ("n" * 100, "q" * 99))[:3], b"OK ")

    def test_queue_may_start_with_dash_and_namespace_with_underscore(self):
        tok = self.new_token("_n-1")
        self.publish("-q_2", ns="_n-1", token=tok)
        self.assertEqual(self.text().cmd("stats-tube _n-1/-q_2")[:3], b"OK ")

    def test_missing_token(self):
        for token in (None, "", "default:", ":"):
            for method, path in self.ROUTES:
                if path.endswith("size"):
                    continue
                self.assertError(self.api(method, path % ("ns", "q"), b"[1]", token=token),
                                 401, "token not found")

    def test_invalid_token(self):
        other = self.new_token("other")
        for token in ("0" * 32, other, self.token + "x", self.token[:-1]):
            for method, path in self.ROUTES:
                if path.endswith("size"):
                    continue
                self.assertError(self.api(method, path % ("ns", "q"), b"[1]", token=token),
                                 401, "invalid token")
        # the other token works in its own namespace
        self.publish("q", ns="other", token=other)

    def test_token_as_query_parameter(self):
        r = self.api("PUT", "/api/ns/q", b"x", token=None, params={"token": self.token})
        self.assertEqual(r.status, 201)
        # the header wins over the parameter
        r = self.api("PUT", "/api/ns/q", b"x", token="bad", params={"token": self.token})
        self.assertError(r, 401, "invalid token")
        # an empty header falls back on the parameter
        r = self.api("PUT", "/api/ns/q", b"x", token="", params={"token": self.token})
        self.assertEqual(r.status, 201)

    def test_pool_prefix(self):
        for token in ("default:" + self.token, ":" + self.token):
            self.publish("q", token=token)
        for method, path in self.ROUTES:
            self.assertError(self.api(method, path % ("ns", "q"), b"[1]", token="other:" + self.token),
                             404, "pool not found")
        self.assertError(self.api("GET", "/api/ns/q", token="other:"), 404, "pool not found")

    def test_check_order(self):
        # names, then pool, then token, then job id, then the route's parameters
        self.assertError(self.api("PUT", "/api/n.s/q?ttl=x", token="x:y"), 400,
                         "namespace name contains forbidden characters")
        self.assertError(self.api("PUT", "/api/ns/q?ttl=x", token="x:y"), 404, "pool not found")
        self.assertError(self.api("PUT", "/api/ns/q?ttl=x", token=None), 401, "token not found")
        self.assertError(self.api("PUT", "/api/ns/q?ttl=x", token="bad"), 401, "invalid token")
        self.assertError(self.api("GET", "/api/ns/q/job/abc", token="bad"), 401, "invalid token")
        self.assertError(self.api("PUT", "/api/ns/q/job/abc?ttl=x"), 400, "invalid job id")

    def test_unknown_routes(self):
        for method, path in (("GET", "/"), ("GET", "/api"), ("GET", "/api/ns"), ("GET", "/api/ns/"),
                             ("GET", "/api/ns/q/"), ("GET", "/api/ns/q/unknown"), ("POST", "/api/ns/q"),
                             ("PATCH", "/api/ns/q"), ("GET", "/api/ns/q/job"), ("GET", "/api/ns/q/job/"),
                             ("PUT", "/api/ns/q/peek"), ("GET", "/api/ns/q/bulk"),
                             ("POST", "/api/ns/q/deadletter"), ("GET", "/api/ns/q/job/1/x"),
                             ("GET", "/token/ns"), ("GET", "/healthz"), ("GET", "/metrics"),
                             ("OPTIONS", "/api/ns/q")):
            r = self.api(method, path)
            self.assertEqual((r.status, r.json()), (404, API_NOT_FOUND), (method, path))


class NumbersTest(HttpCase):
    """Every number parameter: Go's strconv rules, the bound of each size, the error text."""

    U_BAD = ("-1", "x", "", "1.5", "%201", "1%20", "0x1", "%2B1", "1_0", "1e3")

    def check(self, method, path, name, err, overflow, max_ok, extra=None, body=b"[1]"):
        for bad in self.U_BAD + (overflow,):
            params = dict(extra or {})
            params[name] = bad
            self.assertError(self.api(method, path, body, params=params), 400, err)
        params = dict(extra or {})
        params[name] = max_ok
        r = self.api(method, path, body, params=params)
        self.assertIn(r.status, (200, 201, 404), (name, max_ok, r))     # 404: consume found none
        params[name] = "0" * 30 + "1"       # leading zeros are fine
        r = self.api(method, path, body, params=params)
        self.assertIn(r.status, (200, 201, 404), (name, r))

    def test_publish_numbers(self):
        for path in ("/api/ns/q", "/api/ns/q/bulk"):
            self.check("PUT", path, "delay", "invalid delay", "4294967296", U32_MAX, {"ttl": 0})
            self.check("PUT", path, "ttl", "invalid ttl", "4294967296", U32_MAX)
            self.check("PUT", path, "tries", "invalid tries", "65536", "65535")
            self.check("PUT", path, "priority", "invalid priority", "256", "255")
            self.assertError(self.api("PUT", path, b"[1]", params={"tries": "0"}), 400,
                             "tries shouldn't be zero")
            self.assertError(self.api("PUT", path, b"[1]", params={"tries": "000"}), 400,
                             "tries shouldn't be zero")

    def test_publish_check_order(self):
        r = self.api("PUT", "/api/ns/q", b"x", params={"delay": "x", "ttl": "x", "tries": "x", "priority": "x"})
        self.assertError(r, 400, "invalid delay")
        r = self.api("PUT", "/api/ns/q", b"x", params={"ttl": "x", "tries": "x", "priority": "x"})
        self.assertError(r, 400, "invalid ttl")
        r = self.api("PUT", "/api/ns/q", b"x", params={"ttl": 1, "delay": 2, "tries": "x"})
        self.assertError(r, 400, "ttl is shorter than delay")
        r = self.api("PUT", "/api/ns/q", b"x", params={"tries": "x", "priority": "x"})
        self.assertError(r, 400, "invalid tries")
        r = self.api("PUT", "/api/ns/q", b"x", params={"tries": 0, "priority": "x"})
        self.assertError(r, 400, "tries shouldn't be zero")
        r = self.api("PUT", "/api/ns/q", b"x", params={"priority": "x"}, headers=[("Job-Attr-V", "v" * 300)])
        self.assertError(r, 400, "invalid priority")

    def test_consume_numbers(self):
        self.publish("q", tries=65535)
        self.check("GET", "/api/ns/q", "ttr", "invalid ttr", "4294967296", U32_MAX)
        self.check("GET", "/api/ns/q", "timeout", "invalid timeout", "4294967296", "0")
        for bad in self.U_BAD + ("0", "101", "4294967296", "18446744073709551616"):
            self.assertError(self.consume("q", count=bad), 400, "invalid count")
        self.assertEqual(self.consume("q", count="100").status, 404)   # all reserved by now

    def test_consume_check_order(self):
        r = self.consume("q1,q2", ttr="x", timeout="x", count="x", freeze_tries="x")
        self.assertError(r, 400, "invalid ttr")
        self.assertError(self.consume("q1,q2", timeout="x", count="x", freeze_tries="x"), 400, "invalid timeout")
        self.assertError(self.consume("q1,q2", count="x", freeze_tries="x"), 400, "invalid count")
        self.assertError(self.consume("q1,q2", freeze_tries="x"), 400, "invalid freeze_tries value")

    def test_repeated_and_encoded_parameters(self):
        jid = self.publish("q", ttl="5&ttl=x")        # the first value counts
        self.assertLessEqual(self.api("GET", "/api/ns/q/job/" + jid).json()["ttl"], 5)
        jid = self.publish("q", ttl="%31%30")         # "10"
        self.assertIn(self.api("GET", "/api/ns/q/job/" + jid).json()["ttl"], (9, 10))
        self.assertError(self.api("PUT", "/api/ns/q", b"x", params={"ttl": "1+"}), 400, "invalid ttl")
        # a pair with a malformed escape is ignored, so ttl takes its default
        jid = self.publish("q", ttl="%zz")
        self.assertIn(self.api("GET", "/api/ns/q/job/" + jid).json()["ttl"], (86399, 86400))


if __name__ == "__main__":
    unittest.main()

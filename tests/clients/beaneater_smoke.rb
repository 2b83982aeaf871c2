# A real client (Debian's ruby-beaneater) against a server at ARGV[0] ("host:port").
# Exits non-zero with a message on the first unexpected result.
require "beaneater"

def check(cond, what)
  return if cond
  warn "FAILED: #{what}"
  exit 1
end

bs = Beaneater.new(ARGV[0])
tube = bs.tubes["smoke-jobs"]
ids = (1..20).map { |i| tube.put("job #{i}", pri: 100 - i, ttr: 30)[:id] }
check(ids.uniq.size == 20, "20 distinct ids")

stats = tube.stats
check(stats.current_jobs_ready == 20, "stats-tube ready=20, got #{stats.current_jobs_ready}")
check(bs.stats.total_jobs >= 20, "server total-jobs")

bs.tubes.watch!("smoke-jobs")
seen = []
20.times do
  job = bs.tubes.reserve(1)
  seen << job.body
  job.delete
end
check(seen.first == "job 20", "lowest priority value first, got #{seen.first}")
check(seen.sort == (1..20).map { |i| "job #{i}" }.sort, "every job once")

tube.put("to bury")
job = bs.tubes.reserve(1)
job.bury
check(tube.peek(:buried).body == "to bury", "peek-buried")
check(tube.kick(1) == { status: "KICKED", body: nil, id: 1 } || tube.stats.current_jobs_ready == 1,
      "kick")
job = bs.tubes.reserve(1)
check(job.stats.kicks == 1 && job.stats.buries == 1, "job counters")
job.release(delay: 0)
job = bs.tubes.reserve(1)
check(job.stats.releases == 1, "release counter")
job.delete

begin
  bs.tubes.reserve(0)
  check(false, "reserve on an empty tube must time out")
rescue Beaneater::TimedOutError
end

tube.pause(1)
check(tube.stats.pause == 1, "pause-tube")
check(bs.tubes.all.map(&:name).include?("smoke-jobs"), "list-tubes")
bs.close
puts "beaneater smoke test passed"

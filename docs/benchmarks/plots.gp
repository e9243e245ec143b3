# Plots of docs/benchmarks.md, from `inboxbench … --plot-data DIR`:
#   gnuplot -e "dir='DIR'" docs/benchmarks/plots.gp
# (run from the repository root; gnuplot-nox draws PNG with pngcairo or png)
# -e "only='soak'" draws only the soak plot (the other runs' data need not be there).
if (!exists("dir")) dir = "plot"
if (!exists("only")) only = "all"
set terminal pngcairo size 900,520 font "sans,11"
set grid
set key bottom right

if (only ne "soak") {
set output "docs/benchmarks/live-latency.png"
set title "Live messages: send → receiver's handler (200 msgs/s, open loop)"
set xlabel "latency (ms, log scale)"
set ylabel "messages delivered within (%)"
set logscale x
set yrange [0:100]
plot dir."/live-idle.tsv" using 1:2 with lines lw 2 title "idle", \
     dir."/live-storm.tsv" using 1:2 with lines lw 2 title "during a 10,000 × 200 login storm"

set output "docs/benchmarks/storm-drain.png"
set title "Login storms: devices fully drained over time (from the storm's t0)"
set xlabel "time since t0 (s)"
set ylabel "devices drained (%)"
unset logscale x
plot dir."/storm-300x200-drained.tsv" using ($1/1000):2 with lines lw 2 title "300 × 200 (seed)", \
     dir."/storm-3000x200-drained.tsv" using ($1/1000):2 with lines lw 2 title "3,000 × 200", \
     dir."/storm-9000x200-drained.tsv" using ($1/1000):2 with lines lw 2 title "9,000 × 200", \
     dir."/storm-10000x200-drained.tsv" using ($1/1000):2 with lines lw 2 title "10,000 × 200"

set output "docs/benchmarks/storm-first-page.png"
set title "Login storms: first page on the device (from the storm's t0)"
set xlabel "time since t0 (s)"
set ylabel "devices with their first page (%)"
plot dir."/storm-300x200-first-page.tsv" using ($1/1000):2 with lines lw 2 title "300 × 200 (seed)", \
     dir."/storm-3000x200-first-page.tsv" using ($1/1000):2 with lines lw 2 title "3,000 × 200", \
     dir."/storm-9000x200-first-page.tsv" using ($1/1000):2 with lines lw 2 title "9,000 × 200", \
     dir."/storm-10000x200-first-page.tsv" using ($1/1000):2 with lines lw 2 title "10,000 × 200"
}

# The soak (inboxbench soak … --plot-data DIR): DIR/soak.tsv, DIR/soak-waves.tsv;
# the same soak with the lifecycle off (--plot-data DIR/soak-off) for comparison,
# drawn when present.
if (!exists("soakoff")) soakoff = dir."/soak-off"
set output "docs/benchmarks/soak.png"
set terminal pngcairo size 900,900 font "sans,11"
set multiplot layout 2,1 title "Soak: 10 min of steady sends, hot window 1 min, retention 5 min in 1-min ranges, cleanup every 5 s"
set title "Disk, measured"
set xlabel "minutes since the sends started"
set ylabel "MiB"
set key top left
set yrange [0:*]
set xrange [0:*]
set autoscale xfixmax
has_off = system("test -f ".soakoff."/soak.tsv && echo 1 || echo 0") + 0
if (has_off) {
  plot dir."/soak.tsv" using 1:2 with linespoints lw 2 pt 7 title "JetStream store (du)", \
       dir."/soak.tsv" using 1:3 with linespoints lw 2 pt 5 title "Postgres database", \
       dir."/soak.tsv" using 1:4 with lines lw 1 title "  msg\\_content", \
       dir."/soak.tsv" using 1:5 with lines lw 1 title "  inbox\\_archive", \
       soakoff."/soak.tsv" using 1:2 with lines lw 2 dt 2 lc 1 title "JetStream store, lifecycle off", \
       soakoff."/soak.tsv" using 1:3 with lines lw 2 dt 2 lc 2 title "Postgres database, lifecycle off"
} else {
  plot dir."/soak.tsv" using 1:2 with linespoints lw 2 pt 7 title "JetStream store (du)", \
       dir."/soak.tsv" using 1:3 with linespoints lw 2 pt 5 title "Postgres database", \
       dir."/soak.tsv" using 1:4 with lines lw 1 title "  msg\\_content", \
       dir."/soak.tsv" using 1:5 with lines lw 1 title "  inbox\\_archive"
}
set title "Send rate (per sample interval) and catch-up of each returning wave"
set ylabel "messages stored per second"
set y2label "catch-up: backlog entries per second per device"
set y2tics
set ytics nomirror
set yrange [0:*]
set y2range [0:*]
set key below
if (has_off) {
  plot dir."/soak.tsv" using 1:($7 > 0 ? $7 : 1/0) with linespoints lw 2 pt 7 title "send rate", \
       dir."/soak-waves.tsv" using 1:2 axes x1y2 with points pt 9 ps 1.5 title "catch-up: a returning wave's median device (y2)", \
       soakoff."/soak-waves.tsv" using 1:2 axes x1y2 with points pt 8 ps 1.5 lc 2 title "the same, lifecycle off (y2)"
} else {
  plot dir."/soak.tsv" using 1:($7 > 0 ? $7 : 1/0) with linespoints lw 2 pt 7 title "send rate", \
       dir."/soak-waves.tsv" using 1:2 axes x1y2 with points pt 9 ps 1.5 title "catch-up: a returning wave's median device (y2)"
}
unset multiplot
set autoscale x
unset y2tics
unset y2label
set ytics mirror

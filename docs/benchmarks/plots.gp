# Plots of docs/benchmarks.md, from `inboxbench … --plot-data DIR`:
#   gnuplot -e "dir='DIR'" docs/benchmarks/plots.gp
# (run from the repository root; gnuplot-nox draws PNG with pngcairo or png)
if (!exists("dir")) dir = "plot"
set terminal pngcairo size 900,520 font "sans,11"
set grid
set key bottom right

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

# plots.gp - the figures of docs/benchmarks.md, from the data files esbench
# writes.  Called by bench/run.sh as: gnuplot -e "data='DIR'; out='DIR'" plots.gp
set terminal pngcairo size 900,520 font ",11" noenhanced
set grid
set key bottom right

set output out.'/handover.png'
set title 'Hand-over latency: a slot frees -> the next client has it (CDF)'
set logscale x
set xlabel 'microseconds (log scale)'
set ylabel 'fraction of hand-overs'
plot data.'/handover_broker.dat' using 1:2 with lines lw 2 title 'broker: DECLINE -> OFFER', \
     data.'/handover_legacy.dat' using 1:2 with lines lw 2 title 'legacy: slot freed -> GET /token 200 (1 s polling)'

set output out.'/autobalance.png'
set title 'Light job WANT -> OFFER during a flood of heavy jobs (CDF)'
set xlabel 'microseconds (log scale)'
plot data.'/ab_auto.dat' using 1:2 with linespoints lw 2 title 'auto-balance, fastReserve 1', \
     data.'/ab_fixed.dat' using 1:2 with linespoints lw 2 title 'one fixed waitgroup of 4'

unset logscale x
set output out.'/throughput.png'
set title '/bin/true jobs per second against slots K'
set xlabel 'K (slots, workers, parallel spawns)'
set ylabel 'jobs/s'
set key top left
set logscale x 2
set xtics (1, 2, 4, 8)
plot data.'/throughput.dat' using 1:2:3:4 with yerrorlines lw 2 title 'execserver broker (median, min-max)', \
     data.'/throughput.dat' using 1:5:6:7 with yerrorlines lw 2 title 'limit: posix_spawn + waitpid loop', \
     data.'/throughput.dat' using 1:8:9:10 with yerrorlines lw 2 title 'floor: a minimal broker (bench/peers/floor.c)', \
     data.'/gearman.dat' using 1:3 with linespoints lw 2 title 'gearmand + libgearman workers (stamp jobs)', \
     data.'/gearman.dat' using 1:2 with linespoints lw 2 title 'execserver broker (stamp jobs)'

unset logscale x
set output out.'/book_size.png'
set title 'Hand-over cost against parked wants in the book'
set logscale x 10
set xtics auto
set xlabel 'parked wants (log scale)'
set ylabel 'microseconds'
set key top left
plot data.'/book_size.dat' using 1:2 with linespoints lw 2 title 'hand-over p50', \
     data.'/book_size.dat' using 1:(1e6/$4) with linespoints lw 2 title 'time per hand-over cycle (1 / rate)'

# The README's two commands:
#   make demo   install missing Debian packages, build into build/, run the demo, show the reference
#               RNIC (a polled WRITE and a short soak over a faulty link), then show the captures
#               in tshark with the Wireshark plugin
#   make test   install missing Debian packages, then build (warnings as errors) and ctest three
#               times: g++-12 Release (build/; it alone compiles each header on its own), clang++-14
#               Release (build-clang/), g++-12 ASan+UBSan (build-asan/; the plugin's tshark tests
#               run in the first two), then the CRC and codec tests cross-built for aarch64 and
#               run under qemu-aarch64 (build-aarch64/), then every libFuzzer target for 20 s
#               (clang++-14, ASan+UBSan, build-fuzz/)
# Both are idempotent and work as root on a fresh Debian 12 clone (or with sudo).

SHELL := /bin/bash
JOBS ?= $(shell nproc)

# Debian packages the build, tests and benchmarks need (tshark and python3-scapy are the
# independent oracles of the conformance tests; libisal-dev and zlib1g-dev are benchmark peers;
# libwireshark-dev and wireshark-dev build the Wireshark plugin, which the tests run in tshark
# as an unprivileged user through setpriv, from util-linux; ccache speeds up rebuilds;
# g++-12-aarch64-linux-gnu and qemu-user build and run the aarch64 CRC paths' tests;
# libxdp-dev (with libbpf-dev) builds the AF_XDP port and xdp-tools inspects it;
# libibverbs-dev builds the verbs provider, which rdma-core's pyverbs tests (python3-pyverbs),
# ibverbs-utils' pingpongs and perftest check; wireshark (the Qt GUI), xvfb, x11-apps (xwd),
# xdotool and fonts-dejavu-core run the plugin's GUI test and take its screenshot).
PACKAGES := cmake make pkg-config gcc-12 g++-12 clang-14 libclang-rt-14-dev libboost-dev catch2 libbenchmark-dev \
            zlib1g-dev libisal-dev tshark python3-scapy libwireshark-dev wireshark-dev util-linux ccache \
            g++-12-aarch64-linux-gnu qemu-user iputils-ping iperf3 iproute2 python3 tcpdump \
            libibverbs-dev python3-pyverbs ibverbs-utils perftest libxdp-dev xdp-tools \
            wireshark xvfb x11-apps xdotool fonts-dejavu-core python3-pil

# ccache is the compiler launcher when it is on PATH (evaluated when a recipe runs, after deps).
# Paths inside the clone are hashed relative to it, so clones in other directories share hits.
CCACHE = $(shell command -v ccache 2>/dev/null)
LAUNCHER = -DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE) -DCMAKE_C_COMPILER_LAUNCHER=$(CCACHE)
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

# Every configuration make builds treats warnings as errors (a user's own cmake build does not:
# PUSHWIRE_WERROR is off by default). make demo shares build/ with the g++ test configuration;
# its compiler is pinned, so a warning there is ours to fix.
WERROR := -DPUSHWIRE_WERROR=ON
CMAKE_COMMON := -DCMAKE_BUILD_TYPE=RelWithDebInfo $(WERROR)
# The fuzz replays run in the ASan+UBSan build, where they find the most; the other two skip
# them to keep `make test` under 40 minutes on 2 cores. The verbs provider's tests (label
# verbs: pyverbs, pingpongs, perftest) run in the g++ build and under ASan+UBSan (the sanitizer
# runtimes preloaded before the provider); the clang++ build only builds it.
# The C compiler builds the Wireshark plugin's dissector (dissectors/wireshark/). The g++ and
# clang++ builds are Release (-O3), what a user builds, and where g++-12 warns most (-Wrestrict,
# -Warray-bounds, -Wmaybe-uninitialized).
CONFIG_gcc   := -DCMAKE_CXX_COMPILER=g++-12 -DCMAKE_C_COMPILER=gcc-12 -DCMAKE_BUILD_TYPE=Release $(WERROR) \
                -DPUSHWIRE_BUILD_FUZZ_REPLAYS=OFF
# The 240 corrupted captures run once, in the g++ build (PUSHWIRE_WS_CORRUPT=0 skips them).
# The clang++ build also leaves to the others what runs in real time or repeats them whole: the
# netns label (the modules in namespaces, in the g++ and ASan+UBSan builds), the plugin's
# every-field comparison (3 minutes; the other tshark tests still run) and the package test.
CONFIG_clang := -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=Release $(WERROR) \
                -DPUSHWIRE_BUILD_FUZZ_REPLAYS=OFF -DPUSHWIRE_VERBS_TESTS=OFF \
                -DPUSHWIRE_WS_CORRUPT=0 -DPUSHWIRE_HEADER_CHECK=OFF
CTEST_clang  := -LE netns -E 'wireshark: every pushwire field|package: find_package'
# ASan+UBSan at -O1 with line tables only (-g1: what a report's stack needs, at a fraction of
# full debug info's compile time).
# The soaks in virtual time (200 seeds of faults each framing, the conformance of the RNIC's
# own lossy traffic, the 8-to-1 incast) take 20 minutes under ASan+UBSan on 2 cores, 1 in the
# Release builds: they run there, and the sanitizers see the same code paths in the shorter
# rnic, flow and qos tests and in the fuzz replays.
CTEST_asan   := -E 'faults: over 200 seeds|conformance: the reference RNIC.s own traffic over a lossy|qos: an 8-to-1 incast'
CONFIG_asan  := -DCMAKE_CXX_COMPILER=g++-12 -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" $(WERROR) \
                -DPUSHWIRE_SANITIZE=ON -DPUSHWIRE_BUILD_BENCH=OFF -DPUSHWIRE_BUILD_WIRESHARK=OFF -DPUSHWIRE_HEADER_CHECK=OFF
CONFIG_fuzz  := -DCMAKE_CXX_COMPILER=clang++-14 $(CMAKE_COMMON) -DPUSHWIRE_BUILD_FUZZERS=ON \
                -DPUSHWIRE_BUILD_BENCH=OFF -DPUSHWIRE_BUILD_EXAMPLES=OFF -DPUSHWIRE_BUILD_FUZZ_REPLAYS=OFF \
                -DPUSHWIRE_BUILD_WIRESHARK=OFF -DPUSHWIRE_BUILD_VERBS=OFF
DIR_gcc   := build
DIR_clang := build-clang
DIR_asan  := build-asan
DIR_fuzz  := build-fuzz
DIR_aarch64 := build-aarch64

# pushwire-gen's story: the host (10.0.0.1, QP 0x11) and the I/O unit (10.0.0.2, QP 0x22).
HOST_TO_IOU := eth.src=02:00:00:00:00:01 eth.dst=02:00:00:00:00:02 ip.src=10.0.0.1 ip.dst=10.0.0.2
IOU_TO_HOST := eth.src=02:00:00:00:00:02 eth.dst=02:00:00:00:00:01 ip.src=10.0.0.2 ip.dst=10.0.0.1

.PHONY: demo test deps test-gcc test-clang test-asan test-aarch64 test-fuzz bench bench-wireshark bench-report spec clean

demo: deps
	cmake -S . -B $(DIR_gcc) $(CONFIG_gcc) $(LAUNCHER)
	cmake --build $(DIR_gcc) -j $(JOBS)
	./$(DIR_gcc)/examples/pushwire-demo ./$(DIR_gcc)/tools/pushwire-dump
	@echo; echo "=== A RoCEv2 capture of the exchange: $(DIR_gcc)/demo-roce.pcap"
	./$(DIR_gcc)/tools/pushwire-gen --framing roce --out $(DIR_gcc)/demo-roce.pcap
	./$(DIR_gcc)/tools/pushwire-dump $(DIR_gcc)/demo-roce.pcap
	@echo; echo "=== The same, one JSON object per frame (first 3)"
	./$(DIR_gcc)/tools/pushwire-dump --json $(DIR_gcc)/demo-roce.pcap | head -3
	@echo; echo "=== The same story in the seed's cells (EtherType 0x88B5): $(DIR_gcc)/demo-cells.pcap"
	./$(DIR_gcc)/tools/pushwire-gen --framing cell --out $(DIR_gcc)/demo-cells.pcap
	./$(DIR_gcc)/tools/pushwire-dump $(DIR_gcc)/demo-cells.pcap
	@echo; echo "=== The reference RNIC: a WRITE_WITH_IMM with idata over the loopback fabric, polled (examples/rnic_loopback.cpp)"
	./$(DIR_gcc)/examples/pushwire-rnic-loopback
	@echo; echo "=== 500 messages between two RNICs over a link that loses, duplicates, reorders and corrupts 2% of frames"
	./$(DIR_gcc)/tools/pushwire-rnic soak --messages 500 --loss 0.02 --dup 0.02 --reorder 0.02 --corrupt 0.02 --pcap $(DIR_gcc)/demo-rnic.pcap --json
	@echo; echo "=== Its first frames, as the fabric's tap recorded them: $(DIR_gcc)/demo-rnic.pcap"
	./$(DIR_gcc)/tools/pushwire-dump $(DIR_gcc)/demo-rnic.pcap | head -6
	@echo; echo "=== pushwire-conform on that capture (spec/conformance.md): the frames the link corrupted fail their ICRC"
	@echo "    (frame.icrc, or frame.length where a length was hit); its losses, duplicates and reorderings break no rule"
	./$(DIR_gcc)/tools/pushwire-conform $(DIR_gcc)/demo-rnic.pcap | tail -1
	@echo; echo "=== ... and the RoCEv2 story with three frames added by pushwire-gen frame, each breaking a rule: $(DIR_gcc)/demo-broken.pcap"
	cp $(DIR_gcc)/demo-roce.pcap $(DIR_gcc)/demo-broken.pcap
	./$(DIR_gcc)/tools/pushwire-gen frame --out $(DIR_gcc)/demo-broken.pcap $(HOST_TO_IOU) pushwire.opcode=RC_SEND_ONLY \
	  infiniband.bth.destqp=0x22 infiniband.bth.psn=102 infiniband.bth.a=1 --payload 00112233 >/dev/null
	./$(DIR_gcc)/tools/pushwire-gen frame --out $(DIR_gcc)/demo-broken.pcap $(IOU_TO_HOST) pushwire.opcode=RC_ACKNOWLEDGE \
	  infiniband.bth.destqp=0x11 infiniband.bth.psn=150 infiniband.aeth.syndrome=0x1f infiniband.aeth.msn=2 >/dev/null
	./$(DIR_gcc)/tools/pushwire-gen frame --out $(DIR_gcc)/demo-broken.pcap $(HOST_TO_IOU) pushwire.opcode=RC_ACKNOWLEDGE \
	  infiniband.bth.destqp=0x22 infiniband.bth.psn=503 infiniband.aeth.syndrome=0x67 infiniband.aeth.msn=3 >/dev/null
	./$(DIR_gcc)/tools/pushwire-conform $(DIR_gcc)/demo-broken.pcap; test $$? -eq 1
	@echo; echo "=== The split-model driver for real (spec/split-model.md): pushwire-host and pushwire-iou in namespaces,"
	@echo "    RoCEv2 over UDP between them, the fabric live in tshark; ping and iperf3 both ways, then a Flush each way"
	SECONDS_EACH=2 examples/split-model/run.sh $(DIR_gcc)
	@echo; echo "=== LAN emulation among three hosts: MACs embedding LID and UD QPN, ARP, broadcast (examples/split-model/lan.sh)"
	SECONDS_EACH=2 examples/split-model/lan.sh $(DIR_gcc)
	@echo; echo "=== One I/O unit shared by two hosts: a MAC each, LAN frames steered by MAC (examples/split-model/shared.sh)"
	SECONDS_EACH=2 examples/split-model/shared.sh $(DIR_gcc)
	@echo; echo "=== Unmodified RDMA programs on the software RNIC (spec/verbs.md): ibverbs-utils and perftest through"
	@echo "    libpushwire-verbs.so, between two namespaces and over loopback (examples/verbs/run.sh)"
	examples/verbs/run.sh $(DIR_gcc)
	@echo; echo "=== RoCEv2 over AF_XDP (spec/net.md §6): a pingpong between two namespaces through UDP sockets, then"
	@echo "    over AF_XDP, where an XDP program steers UDP 4791 to the socket and passes ping to the kernel (examples/xdp/run.sh)"
	examples/xdp/run.sh $(DIR_gcc)
	@echo; echo "=== Card memory (seed 000, spec/rnic.md §15): WRITEs between host memory and a card on the HCA's socket"
	@echo "    or on the other, the same ibv_post_send each time; the device goes P2P or through a bounce buffer"
	PUSHWIRE_VERBS_PLATFORM="sockets=2 hca=0 card=0 card=1" $(DIR_gcc)/verbs/pushwire-verbs run -- $(DIR_gcc)/examples/pushwire-cards
	@echo; echo "=== One software RNIC shared by programs (spec/rnicd.md): pushwire-rnicd per namespace, two pingpong"
	@echo "    pairs at once through one address each side, on the PF and on VF 1 (examples/verbs/shared.sh)"
	examples/verbs/shared.sh $(DIR_gcc)
	@echo; echo "=== Moving a running program's function to another device process (spec/migration.md): a pingpong"
	@echo "    runs on while its VF moves from host a to host b with its address (examples/verbs/migrate.sh)"
	examples/verbs/migrate.sh $(DIR_gcc)
	@echo; echo "=== Quality of service inside the device (spec/qos.md): 8 RC flows into one 25 Gb/s port through a 200 KB"
	@echo "    switch buffer, in virtual time; with DCQCN (CNPs, rate cuts) no tail drop, without it drops"
	./$(DIR_gcc)/bench/pushwire-incast | grep summary
	@if [ -f $(DIR_gcc)/plugins/4.0/epan/pushwire.so ]; then \
	  echo; echo "=== Both captures in stock tshark with the pushwire plugin (dissectors/wireshark/tshark-pushwire)"; \
	  dissectors/wireshark/tshark-pushwire --build $(DIR_gcc) -r $(DIR_gcc)/demo-roce.pcap; \
	  dissectors/wireshark/tshark-pushwire --build $(DIR_gcc) -r $(DIR_gcc)/demo-cells.pcap; \
	  echo; echo "=== The DC connect, page-fault ACK and idata frames, pushwire's tree only"; \
	  dissectors/wireshark/tshark-pushwire --build $(DIR_gcc) -r $(DIR_gcc)/demo-roce.pcap -O pushwire -V \
	    -Y 'frame.number in {3,6,10}' | grep -v '^ *\[\(Severity\|Group\)'; \
	fi

test: deps
	$(MAKE) --no-print-directory test-gcc
	$(MAKE) --no-print-directory test-clang
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-aarch64
	$(MAKE) --no-print-directory test-fuzz

test-gcc test-clang test-asan: test-%:
	cmake -S . -B $(DIR_$*) $(CONFIG_$*) $(LAUNCHER)
	cmake --build $(DIR_$*) -j $(JOBS)
	ctest --test-dir $(DIR_$*) -j $(JOBS) --output-on-failure $(CTEST_$*)

# The CRC and codec tests for aarch64, under qemu-aarch64 (tests/aarch64/Makefile).
test-aarch64:
	$(MAKE) --no-print-directory -f tests/aarch64/Makefile OUT=$(DIR_aarch64) CCACHE=$(CCACHE) -j $(JOBS) run

# Every libFuzzer target for PUSHWIRE_FUZZ_SECONDS (20 s) under ASan+UBSan with clang++-14; a
# crash fails (fuzz/README.md). Prints each target's exec/s and coverage.
test-fuzz:
	cmake -S . -B $(DIR_fuzz) $(CONFIG_fuzz) $(LAUNCHER)
	cmake --build $(DIR_fuzz) -j $(JOBS) --target fuzzers
	ctest --test-dir $(DIR_fuzz) -L fuzz-run -j $(JOBS) --output-on-failure -V | grep -E ': -- [a-z_]+: |tests passed|Failed|\*\*\*' ; \
	  exit $${PIPESTATUS[0]}

# Installs whichever of PACKAGES are missing (apt-get update first); skips those present.
deps:
	@missing=(); \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$$p"); \
	done; \
	if [ $${#missing[@]} -eq 0 ]; then echo "deps: all $(words $(PACKAGES)) Debian packages present"; exit 0; fi; \
	echo "deps: installing $${missing[*]}"; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; \
	else echo "deps: need root or sudo to install $${missing[*]}" >&2; exit 1; fi; \
	$$sudo apt-get update -q && \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$${missing[@]}"

bench: deps
	cmake -S . -B $(DIR_gcc) $(CONFIG_gcc) $(LAUNCHER)
	cmake --build $(DIR_gcc) -j $(JOBS) --target pushwire-bench
	./$(DIR_gcc)/bench/pushwire-bench

# tshark on 100,000 RoCEv2 frames with and without the plugin (bench/tshark_plugin.sh).
bench-wireshark: deps
	cmake -S . -B $(DIR_gcc) $(CONFIG_gcc) $(LAUNCHER)
	cmake --build $(DIR_gcc) -j $(JOBS) --target pushwire-wireshark pushwire-gen
	bench/tshark_plugin.sh $(DIR_gcc)

# The report (root): bench/split_model.sh (veth, VXLAN, the split-model driver; iperf3 and ping),
# bench/line_rate.sh (the verbs provider over UDP and AF_XDP against one TCP stream: the datapath
# goals' table),
# bench/pingpong.sh (pushwire-rnic pingpong against fi_pingpong's udp;ofi_rxd and tcp;ofi_rxm)
# and pushwire-bench, in one run -> bench/results.md and bench/*.png (bench/report.py, with
# bench/notes.md appended: where the time goes). BENCH_SECONDS: each iperf3 run (10).
BENCH_PACKAGES := libfabric-bin python3-matplotlib iperf3 iputils-ping iproute2 python3 perftest strace
BENCH_SECONDS ?= 10
bench-report: deps
	@$(MAKE) --no-print-directory deps PACKAGES="$(BENCH_PACKAGES)"
	cmake -S . -B $(DIR_gcc) $(CONFIG_gcc) $(LAUNCHER)
	cmake --build $(DIR_gcc) -j $(JOBS) --target pushwire-host pushwire-iou pushwire-rnic pushwire-bench pushwire-verbs pushwire-verbs-run pushwire-rnicd pushwire-incast
	./$(DIR_gcc)/bench/pushwire-incast >$(DIR_gcc)/incast.jsonl
	bench/incast.py $(DIR_gcc)/incast.jsonl bench
	bench/split_model.sh $(DIR_gcc) $(BENCH_SECONDS) >$(DIR_gcc)/split_model.jsonl
	bench/pingpong.sh $(DIR_gcc) >$(DIR_gcc)/pingpong.jsonl
	bench/perftest.sh $(DIR_gcc) >$(DIR_gcc)/perftest.jsonl
	bench/line_rate.sh $(DIR_gcc) $(BENCH_SECONDS) >$(DIR_gcc)/line_rate.jsonl
	bench/rnicd.sh $(DIR_gcc) >$(DIR_gcc)/rnicd.jsonl
	-bench/migration.sh $(DIR_gcc) >$(DIR_gcc)/migration.jsonl  # a failed count is a row of the report
	./$(DIR_gcc)/bench/pushwire-bench --benchmark_format=json >$(DIR_gcc)/bench.json
	bench/report.py --split $(DIR_gcc)/split_model.jsonl --pingpong $(DIR_gcc)/pingpong.jsonl \
	  --perftest $(DIR_gcc)/perftest.jsonl --line-rate $(DIR_gcc)/line_rate.jsonl --rnicd $(DIR_gcc)/rnicd.jsonl --migration $(DIR_gcc)/migration.jsonl --bench $(DIR_gcc)/bench.json \
	  --notes bench/notes.md --out bench/results.md

# Regenerates the tables in spec/ from the code.
spec:
	cmake --build $(DIR_gcc) --target spec

clean:
	rm -rf $(DIR_gcc) $(DIR_clang) $(DIR_asan) $(DIR_fuzz) $(DIR_aarch64)

// cnidriver: a small CNI runtime built on the real libcni (Debian's
// golang-github-appc-cni-dev, libcni 1.1.2), used by dpu-cni's system tests and
// benchmark to drive plugins exactly as container runtimes do.
//
//	cnidriver add|check|del -conf F -netns P -id ID [-ifname eth0] [-mac M] [-device PCI] [-args "K=V;..."]
//	cnidriver gc -conf F [-valid ID/IF,ID/IF]      (CNI 1.1.0 GC)
//	cnidriver status -conf F                       (CNI 1.1.0 STATUS)
//	cnidriver version -conf F                      (VERSION of every plugin)
//	cnidriver bench -conf F -n 100 -concurrency 1 -netns-prefix /run/netns/b- [-label dpu-cni]
//	         [-conf2 G -netns-prefix2 /run/netns/h- -label2 host-device] [-rounds R]
//
// -conf is a conflist or a single conf; in bench mode "@I@" in it is replaced by
// the pod index and "@IP@" by index+2 (for per-pod devices and static addresses).
// Bench prints one JSON report per plugin, round and op (ADD, then DEL).
// Plugins are looked up in -path (colon-separated). Results print as JSON on
// stdout; a plugin error prints {"code","msg","details"} on stdout and exits 1.
//
// libcni 1.1.2 predates CNI 1.1.0: it has no GC or STATUS and cannot parse 1.1.0
// results. GC and STATUS are therefore sent through libcni's invoke package the
// way libcni 1.2 does it (only to plugins whose VERSION lists 1.1.0, with
// cniVersion 1.1.0 and cni.dev/valid-attachments for GC); ADD/CHECK/DEL use
// conflists of cniVersion 1.0.0 or 0.4.0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
)

var (
	confPath    = flag.String("conf", "", "conflist or conf file")
	netnsPath   = flag.String("netns", "", "network namespace path (CNI_NETNS)")
	containerID = flag.String("id", "", "container id (CNI_CONTAINERID)")
	ifname      = flag.String("ifname", "eth0", "interface name (CNI_IFNAME)")
	mac         = flag.String("mac", "", "capability arg mac")
	device      = flag.String("device", "", "capability arg deviceID")
	ips         = flag.String("ips", "", "capability arg ips, comma-separated")
	cniArgs     = flag.String("args", "", "CNI_ARGS, K=V;K=V")
	pluginPath  = flag.String("path", "/usr/lib/cni", "plugin directories, colon-separated")
	cacheDir    = flag.String("cachedir", "", "libcni result cache directory (default: libcni's)")
	valid       = flag.String("valid", "", "GC: attachments to keep, ID/IF,ID/IF")
	count       = flag.Int("n", 100, "bench: number of pods")
	concurrency = flag.Int("concurrency", 1, "bench: operations in flight")
	nsPrefix    = flag.String("netns-prefix", "", "bench: netns path prefix, index appended")
	idPrefix    = flag.String("id-prefix", "bench-", "bench: container id prefix, label and index appended")
	label       = flag.String("label", "plugin", "bench: name of the plugin under -conf in the report")
	conf2       = flag.String("conf2", "", "bench: a second conflist measured in the same run, interleaved")
	label2      = flag.String("label2", "peer", "bench: name of the plugin under -conf2")
	nsPrefix2   = flag.String("netns-prefix2", "", "bench: netns path prefix for -conf2")
	rounds      = flag.Int("rounds", 1, "bench: repeat ADD-then-DEL this many times")
	timeout     = flag.Duration("timeout", 60*time.Second, "per operation")
)

func loadList(text []byte) (*libcni.NetworkConfigList, error) {
	var probe map[string]interface{}
	if err := json.Unmarshal(text, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", *confPath, err)
	}
	if _, ok := probe["plugins"]; ok {
		return libcni.ConfListFromBytes(text)
	}
	conf, err := libcni.ConfFromBytes(text)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(conf)
}

func runtimeConf(id, netns string) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: *ifname, CapabilityArgs: map[string]interface{}{}}
	if *cniArgs != "" {
		for _, kv := range strings.Split(*cniArgs, ";") {
			parts := strings.SplitN(kv, "=", 2)
			if len(parts) == 2 {
				rt.Args = append(rt.Args, [2]string{parts[0], parts[1]})
			}
		}
	}
	if *mac != "" {
		rt.CapabilityArgs["mac"] = *mac
	}
	if *device != "" {
		rt.CapabilityArgs["deviceID"] = *device
	}
	if *ips != "" {
		rt.CapabilityArgs["ips"] = strings.Split(*ips, ",")
	}
	return rt
}

// fail prints a plugin's error as the spec's JSON (or a plain message) and exits 1.
func fail(err error) {
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		out, _ := json.Marshal(map[string]interface{}{"code": cniErr.Code, "msg": cniErr.Msg, "details": cniErr.Details})
		fmt.Println(string(out))
	} else {
		out, _ := json.Marshal(map[string]interface{}{"code": 0, "msg": err.Error(), "details": ""})
		fmt.Println(string(out))
	}
	fmt.Fprintln(os.Stderr, "cnidriver:", err)
	os.Exit(1)
}

func newCNI() *libcni.CNIConfig {
	paths := strings.Split(*pluginPath, ":")
	if *cacheDir != "" {
		return libcni.NewCNIConfigWithCacheDir(paths, *cacheDir, nil)
	}
	return libcni.NewCNIConfig(paths, nil)
}

// pluginsSpeaking110 returns the plugins of the list whose VERSION lists 1.1.0,
// each with its config rebuilt as libcni 1.2 builds it for GC and STATUS.
func pluginsSpeaking110(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList,
	extra map[string]interface{}) ([]string, [][]byte, error) {
	var paths []string
	var confs [][]byte
	for _, p := range list.Plugins {
		info, err := cni.GetVersionInfo(ctx, p.Network.Type)
		if err != nil {
			return nil, nil, err
		}
		speaks := false
		for _, v := range info.SupportedVersions() {
			if v == "1.1.0" {
				speaks = true
			}
		}
		if !speaks {
			continue
		}
		inject := map[string]interface{}{"name": list.Name, "cniVersion": "1.1.0"}
		for k, v := range extra {
			inject[k] = v
		}
		conf, err := libcni.InjectConf(p, inject)
		if err != nil {
			return nil, nil, err
		}
		path, err := invoke.FindInPath(p.Network.Type, cni.Path)
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, path)
		confs = append(confs, conf.Bytes)
	}
	return paths, confs, nil
}

func runVerb110(ctx context.Context, verb string, cni *libcni.CNIConfig, list *libcni.NetworkConfigList) error {
	extra := map[string]interface{}{}
	if verb == "GC" {
		keep := []map[string]string{}
		if *valid != "" {
			for _, a := range strings.Split(*valid, ",") {
				parts := strings.SplitN(a, "/", 2)
				if len(parts) != 2 {
					return fmt.Errorf("-valid: %q is not ID/IFNAME", a)
				}
				keep = append(keep, map[string]string{"containerID": parts[0], "ifname": parts[1]})
			}
		}
		extra["cni.dev/valid-attachments"] = keep
	}
	paths, confs, err := pluginsSpeaking110(ctx, cni, list, extra)
	if err != nil {
		return err
	}
	args := &invoke.Args{Command: verb, Path: strings.Join(cni.Path, ":")}
	for i := range paths {
		if err := invoke.ExecPluginWithoutResult(ctx, paths[i], confs[i], args, nil); err != nil {
			return err
		}
	}
	return nil
}

type benchReport struct {
	Plugin      string    `json:"plugin"`
	Mode        string    `json:"mode"`
	Round       int       `json:"round"`
	Op          string    `json:"op"`
	Count       int       `json:"count"`
	Concurrency int       `json:"concurrency"`
	WallMs      float64   `json:"wall_ms"`
	LatenciesMs []float64 `json:"latencies_ms"`
	Errors      []string  `json:"errors,omitempty"`
}

// benchTarget is one plugin under test: its per-pod conflists and netns prefix.
type benchTarget struct {
	label    string
	lists    []*libcni.NetworkConfigList
	nsPrefix string
}

func loadTarget(label, path, nsPrefix string) benchTarget {
	template, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	t := benchTarget{label: label, lists: make([]*libcni.NetworkConfigList, *count), nsPrefix: nsPrefix}
	for i := range t.lists {
		text := strings.ReplaceAll(string(template), "@IP@", fmt.Sprint(i+2))
		text = strings.ReplaceAll(text, "@I@", fmt.Sprint(i))
		l, err := loadList([]byte(text))
		if err != nil {
			fail(err)
		}
		t.lists[i] = l
	}
	return t
}

func (t benchTarget) op(cni *libcni.CNIConfig, op string, i int) (float64, error) {
	rt := runtimeConf(fmt.Sprintf("%s%s-%d", *idPrefix, t.label, i), fmt.Sprintf("%s%d", t.nsPrefix, i))
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	var err error
	if op == "ADD" {
		_, err = cni.AddNetworkList(ctx, t.lists[i], rt)
	} else {
		err = cni.DelNetworkList(ctx, t.lists[i], rt)
	}
	return float64(time.Since(start).Microseconds()) / 1000, err
}

// phase runs op for every pod of t with the given concurrency.
func (t benchTarget) phase(cni *libcni.CNIConfig, op string, round int) benchReport {
	rep := benchReport{Plugin: t.label, Mode: "concurrent", Round: round, Op: op, Count: *count,
		Concurrency: *concurrency, LatenciesMs: make([]float64, *count)}
	if *concurrency == 1 {
		rep.Mode = "sequential"
	}
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ms, err := t.op(cni, op, i)
				mu.Lock()
				rep.LatenciesMs[i] = ms
				if err != nil {
					rep.Errors = append(rep.Errors, fmt.Sprintf("%s %d: %v", op, i, err))
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < *count; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	rep.WallMs = float64(time.Since(start).Microseconds()) / 1000
	return rep
}

func printReport(rep benchReport) {
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
}

// bench measures ADD then DEL for every pod. With a second target (-conf2) the
// two plugins are measured in the same run, interleaved so that load on a
// shared machine falls on both alike: sequentially pod by pod (A then B for
// each pod), concurrently phase by phase, for -rounds rounds.
func bench() {
	cni := newCNI()
	targets := []benchTarget{loadTarget(*label, *confPath, *nsPrefix)}
	if *conf2 != "" {
		targets = append(targets, loadTarget(*label2, *conf2, *nsPrefix2))
	}
	for round := 0; round < *rounds; round++ {
		if *concurrency > 1 {
			for _, op := range []string{"ADD", "DEL"} {
				for _, t := range targets {
					printReport(t.phase(cni, op, round))
				}
			}
			continue
		}
		for _, op := range []string{"ADD", "DEL"} {
			reps := make([]benchReport, len(targets))
			for k, t := range targets {
				reps[k] = benchReport{Plugin: t.label, Mode: "sequential", Round: round, Op: op, Count: *count,
					Concurrency: 1, LatenciesMs: make([]float64, *count)}
			}
			starts := make([]time.Duration, len(targets))
			for i := 0; i < *count; i++ {
				for k, t := range targets {
					t0 := time.Now()
					ms, err := t.op(cni, op, i)
					starts[k] += time.Since(t0)
					reps[k].LatenciesMs[i] = ms
					if err != nil {
						reps[k].Errors = append(reps[k].Errors, fmt.Sprintf("%s %d: %v", op, i, err))
					}
				}
			}
			for k := range reps {
				reps[k].WallMs = float64(starts[k].Microseconds()) / 1000
				printReport(reps[k])
			}
		}
	}
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cnidriver add|check|del|gc|status|version|bench -conf FILE [flags]")
		flag.PrintDefaults()
	}
	if len(os.Args) < 2 {
		flag.Usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	if err := flag.CommandLine.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if *confPath == "" {
		fmt.Fprintln(os.Stderr, "cnidriver: -conf is required")
		os.Exit(2)
	}
	if verb == "bench" {
		bench()
		return
	}
	text, err := os.ReadFile(*confPath)
	if err != nil {
		fail(err)
	}
	list, err := loadList(text)
	if err != nil {
		fail(err)
	}
	cni := newCNI()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rt := runtimeConf(*containerID, *netnsPath)
	switch verb {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			fail(err)
		}
		if err := res.Print(); err != nil {
			fail(err)
		}
		fmt.Println()
	case "check":
		if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
			fail(err)
		}
	case "del":
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			fail(err)
		}
	case "gc":
		if err := runVerb110(ctx, "GC", cni, list); err != nil {
			fail(err)
		}
	case "status":
		if err := runVerb110(ctx, "STATUS", cni, list); err != nil {
			fail(err)
		}
	case "version":
		for _, p := range list.Plugins {
			info, err := cni.GetVersionInfo(ctx, p.Network.Type)
			if err != nil {
				fail(err)
			}
			out, _ := json.Marshal(map[string]interface{}{"type": p.Network.Type, "supportedVersions": info.SupportedVersions()})
			fmt.Println(string(out))
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

// An MCP server on Go's standard library alone, for guard's end-to-end tests.
//
// Its decoder is encoding/json: a key matches a struct field whatever its case
// ("Method", "NAME", "pAth"), and of two keys for one field the last wins. Lines are
// split at "\n" only. Its tools act for real, relative to its working directory:
// read_file {path} and write_file {path, content}, each path cleaned with
// filepath.Clean (".." removed as text, before symlinks). resources/read of a file
// URI reads url.Parse(uri).Path. Every request it acts on is appended to the log
// file given as os.Args[1].
//
//	go build -o goserver main.go && ./goserver LOG_FILE
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type callParams struct {
	Name      string `json:"name"`
	Arguments struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"arguments"`
}

type readParams struct {
	URI string `json:"uri"`
}

type initParams struct {
	ProtocolVersion string `json:"protocolVersion"`
}

var out = bufio.NewWriter(os.Stdout)

func send(id json.RawMessage, result interface{}) {
	data, _ := json.Marshal(map[string]interface{}{"jsonrpc": "2.0", "id": id, "result": result})
	out.Write(data)
	out.WriteString("\n")
	out.Flush()
}

func fail(id json.RawMessage, code int, text string) {
	data, _ := json.Marshal(map[string]interface{}{
		"jsonrpc": "2.0", "id": id, "error": map[string]interface{}{"code": code, "message": text},
	})
	out.Write(data)
	out.WriteString("\n")
	out.Flush()
}

func note(method string, params json.RawMessage) {
	log, err := os.OpenFile(os.Args[1], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer log.Close()
	data, _ := json.Marshal(map[string]interface{}{"method": method, "params": params})
	log.Write(append(data, '\n'))
}

func toolResult(text string, isError bool) map[string]interface{} {
	return map[string]interface{}{
		"content": []interface{}{map[string]interface{}{"type": "text", "text": text}},
		"isError": isError,
	}
}

func tools() map[string]interface{} {
	str := map[string]interface{}{"type": "string"}
	schema := func(props map[string]interface{}) map[string]interface{} {
		return map[string]interface{}{"type": "object", "properties": props}
	}
	return map[string]interface{}{"tools": []interface{}{
		map[string]interface{}{"name": "read_file", "inputSchema": schema(map[string]interface{}{"path": str})},
		map[string]interface{}{"name": "write_file", "inputSchema": schema(map[string]interface{}{"path": str, "content": str})},
	}}
}

func handle(msg message) {
	switch msg.Method {
	case "initialize":
		var p initParams
		json.Unmarshal(msg.Params, &p)
		send(msg.ID, map[string]interface{}{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]interface{}{"tools": map[string]interface{}{}, "resources": map[string]interface{}{}},
			"serverInfo":      map[string]interface{}{"name": "go-test-server", "version": "1"},
		})
	case "tools/list":
		send(msg.ID, tools())
	case "tools/call":
		note(msg.Method, msg.Params)
		var p callParams
		if err := json.Unmarshal(msg.Params, &p); err != nil {
			fail(msg.ID, -32602, err.Error())
			return
		}
		path := filepath.Clean(p.Arguments.Path)
		switch p.Name {
		case "read_file":
			data, err := os.ReadFile(path)
			if err != nil {
				send(msg.ID, toolResult(err.Error(), true))
				return
			}
			send(msg.ID, toolResult(string(data), false))
		case "write_file":
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(p.Arguments.Content), 0o644); err != nil {
				send(msg.ID, toolResult(err.Error(), true))
				return
			}
			send(msg.ID, toolResult("wrote "+path, false))
		default:
			send(msg.ID, toolResult("no tool "+p.Name, true))
		}
	case "resources/read":
		note(msg.Method, msg.Params)
		var p readParams
		json.Unmarshal(msg.Params, &p)
		u, err := url.Parse(p.URI)
		if err != nil {
			fail(msg.ID, -32602, err.Error())
			return
		}
		data, err := os.ReadFile(filepath.Clean(u.Path))
		if err != nil {
			fail(msg.ID, -32002, err.Error())
			return
		}
		send(msg.ID, map[string]interface{}{"contents": []interface{}{
			map[string]interface{}{"uri": p.URI, "text": string(data)},
		}})
	default:
		if len(msg.ID) > 0 && msg.Method != "" {
			fail(msg.ID, -32601, fmt.Sprintf("method not found: %s", msg.Method))
		}
	}
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var msg message
			if json.Unmarshal(line, &msg) == nil {
				handle(msg)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			return
		}
	}
}

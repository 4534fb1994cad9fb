package chat

import (
	"fmt"
	"strings"
	"time"
)

// pyStrftime formats t like Python's datetime.strftime under the C locale on
// glibc, which is what transformers' strftime_now runs on. Templates such as
// Llama 3.2's call strftime_now("%d %b %Y") to fill in today's date.
//
// Formatting directive by directive (instead of translating to a Go layout)
// keeps literal text safe: a Go layout would rewrite digits like "2006" or
// "01" appearing in the format's plain text. glibc's '-' flag (no padding,
// e.g. "%-d") is supported because templates written on Linux use it;
// unknown directives are copied through unchanged, as glibc does.
func pyStrftime(t time.Time, format string) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			sb.WriteByte(c)
			continue
		}
		start := i
		i++
		noPad := false
		if format[i] == '-' && i+1 < len(format) {
			noPad = true
			i++
		}
		num := func(v, width int) string {
			if noPad {
				return fmt.Sprint(v)
			}
			return fmt.Sprintf("%0*d", width, v)
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		switch format[i] {
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'b', 'h':
			sb.WriteString(t.Month().String()[:3])
		case 'B':
			sb.WriteString(t.Month().String())
		case 'd':
			sb.WriteString(num(t.Day(), 2))
		case 'e':
			if noPad {
				sb.WriteString(fmt.Sprint(t.Day()))
			} else {
				sb.WriteString(fmt.Sprintf("%2d", t.Day()))
			}
		case 'm':
			sb.WriteString(num(int(t.Month()), 2))
		case 'y':
			sb.WriteString(num(t.Year()%100, 2))
		case 'Y':
			sb.WriteString(fmt.Sprint(t.Year()))
		case 'H':
			sb.WriteString(num(t.Hour(), 2))
		case 'I':
			sb.WriteString(num(hour12, 2))
		case 'M':
			sb.WriteString(num(t.Minute(), 2))
		case 'S':
			sb.WriteString(num(t.Second(), 2))
		case 'f':
			sb.WriteString(fmt.Sprintf("%06d", t.Nanosecond()/1000))
		case 'p':
			if t.Hour() < 12 {
				sb.WriteString("AM")
			} else {
				sb.WriteString("PM")
			}
		case 'j':
			sb.WriteString(num(t.YearDay(), 3))
		case 'w':
			sb.WriteString(fmt.Sprint(int(t.Weekday())))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			sb.WriteString(fmt.Sprint(wd))
		case 'z', 'Z':
			// transformers formats datetime.now(), a naive datetime, for
			// which Python prints no zone at all.
		case 'D':
			sb.WriteString(pyStrftime(t, "%m/%d/%y"))
		case 'F':
			sb.WriteString(pyStrftime(t, "%Y-%m-%d"))
		case 'T':
			sb.WriteString(pyStrftime(t, "%H:%M:%S"))
		case 'R':
			sb.WriteString(pyStrftime(t, "%H:%M"))
		case 'c':
			sb.WriteString(pyStrftime(t, "%a %b %e %H:%M:%S %Y"))
		case 'x':
			sb.WriteString(pyStrftime(t, "%m/%d/%y"))
		case 'X':
			sb.WriteString(pyStrftime(t, "%H:%M:%S"))
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteString(format[start : i+1])
		}
	}
	return sb.String()
}

import React from 'react';
import { Calendar, DatePicker, TimePicker } from 'antd';
import { day } from './data.js';

// Every picker is opened on a fixed date (data.js), so nothing depends on today's date.
export default { title: 'Pickers/DatePicker' };

const Box = ({ children }) => <div style={{ width: 640, height: 420 }}>{children}</div>;

export const DateOpen = { render: () => <Box><DatePicker open defaultValue={day} /></Box> };
export const RangeOpen = {
  render: () => <Box><DatePicker.RangePicker open defaultValue={[day, day.add(9, 'day')]} /></Box>,
};
export const MonthOpen = { render: () => <Box><DatePicker open picker="month" defaultValue={day} /></Box> };
export const YearOpen = { render: () => <Box><DatePicker open picker="year" defaultValue={day} /></Box> };
export const WithTimeOpen = { render: () => <Box><DatePicker open showTime defaultValue={day} /></Box> };
export const TimeOpen = { render: () => <Box><TimePicker open defaultValue={day} /></Box> };
export const InlineCalendar = {
  render: () => <div style={{ width: 420 }}><Calendar fullscreen={false} defaultValue={day} /></div>,
};

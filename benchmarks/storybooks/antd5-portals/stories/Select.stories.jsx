import React from 'react';
import { AutoComplete, Cascader, Select, Space, TreeSelect } from 'antd';
import { cities, tree } from './data.js';

export default { title: 'Pickers/Select', parameters: { layout: 'fullscreen' } };

const Box = ({ children }) => <div style={{ width: 320, height: 360 }}>{children}</div>;

export const SingleOpen = { render: () => <Box><Select open style={{ width: 240 }} defaultValue="porto" options={cities} /></Box> };
export const MultipleOpen = {
  render: () => <Box><Select open mode="multiple" style={{ width: 300 }} defaultValue={['porto', 'brno']} options={cities} /></Box>,
};
export const TagsOpen = {
  render: () => <Box><Select open mode="tags" style={{ width: 300 }} defaultValue={['urgent']} options={[{ value: 'urgent' }, { value: 'later' }, { value: 'blocked' }]} /></Box>,
};
export const Grouped = {
  render: () => (
    <Box>
      <Select open style={{ width: 240 }} defaultValue="se"
        options={[
          { label: 'Europe', options: [{ value: 'se', label: 'Sweden' }, { value: 'de', label: 'Germany' }] },
          { label: 'Asia', options: [{ value: 'jp', label: 'Japan' }, { value: 'in', label: 'India' }] },
        ]} />
    </Box>
  ),
};
export const Sizes = {
  render: () => (
    <Space direction="vertical">
      <Select size="small" style={{ width: 200 }} defaultValue="porto" options={cities} />
      <Select style={{ width: 200 }} defaultValue="turin" options={cities} />
      <Select size="large" style={{ width: 200 }} defaultValue="lagos" options={cities} />
      <Select status="error" style={{ width: 200 }} placeholder="Required" options={cities} />
    </Space>
  ),
};
export const CascaderOpen = {
  render: () => (
    <Box>
      <Cascader open style={{ width: 260 }} defaultValue={['eu', 'se', 'upp']}
        options={tree.map(function map(n) { return { value: n.value, label: n.title, children: n.children?.map(map) }; })} />
    </Box>
  ),
};
export const TreeSelectOpen = {
  render: () => <Box><TreeSelect open treeDefaultExpandAll style={{ width: 260 }} defaultValue="upp" treeData={tree} /></Box>,
};
export const AutoCompleteOpen = {
  render: () => <Box><AutoComplete open style={{ width: 260 }} defaultValue="B" options={[{ value: 'Bremen' }, { value: 'Brno' }, { value: 'Bergen' }, { value: 'Busan' }]} /></Box>,
};
